import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# Chainer 7.8.1 reads names that today's NumPy and setuptools no longer have. This one line,
# installed as a .pth file at the top of site-packages, runs at every interpreter start and,
# when the package is there (a leftover line stays silent), imports
# _researchutils_chainer_compat, which registers a finder that completes those Chainer
# modules only where the stack lacks what they read. That small package sits beside
# researchutils rather than in it, so that starting Python imports neither researchutils
# (a checkout of another version stays importable) nor NumPy, and `import chainer` works
# first thing in any script.
PTH_NAME = 'researchutils_chainer_compat.pth'
PTH_LINE = ("import importlib.util as u; u.find_spec('_researchutils_chainer_compat') and "
            "__import__('_researchutils_chainer_compat')\n")
# researchutils 0.1 wrote this file; installing over a copy left behind replaces it with a
# line that does nothing, and uninstalling removes it.
OLD_PTH_NAME = 'researchutils_py312_compat.pth'
OLD_PTH_LINE = '# superseded by researchutils_chainer_compat.pth\n'


class build_py_with_pth(build_py):
    """build_py that also writes the .pth file at the root of the wheel.

    A regular wheel (`pip install .`, `pip wheel .`) is packed from build_lib. A PEP 660
    editable wheel (`pip install -e .`, setuptools >= 64) is packed from install's
    install_lib, and its build_lib is thrown away.
    """

    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False):
            root = self.get_finalized_command('install').install_lib
        else:
            root = self.build_lib
        self.mkpath(root)
        for name, line in ((PTH_NAME, PTH_LINE), (OLD_PTH_NAME, OLD_PTH_LINE)):
            with open(os.path.join(root, name), 'w', encoding='utf-8') as f:
                f.write(line)


here = os.path.abspath(os.path.dirname(__file__))
about = {}
with open(os.path.join(here, 'researchutils', '_version.py')) as f:
    exec(f.read(), about)

with open(os.path.join(here, 'README.md'), encoding='utf-8') as f:
    long_description = f.read()

extras = {
    'slack': ['slack_sdk>=3.19,<4'],
    'mpi': ['mpi4py>=3.1'],
    'plot': ['matplotlib>=3.3'],
    # Optuna's own figures (search_history.png...) need the plot extra too.
    'search': ['optuna>=4.0'],
    # A study on a PostgreSQL server (postgresql:// URLs): SQLAlchemy 2.1 made psycopg 3 the
    # driver of a plain postgresql:// URL (2.0 and older took psycopg2), so the extra asks for
    # both; the binary wheels carry libpq, so no system library is needed.
    'search-db': ['optuna>=4.0', 'sqlalchemy>=2.1', 'psycopg[binary]>=3.1'],
    # Export to ONNX (researchutils.chainer.onnx): onnx_chainer, inside Chainer, writes the
    # graph; onnxruntime runs it (the tests compare it with Chainer). onnx 1.19 removed
    # onnx.mapping, which the compatibility finder supplies to onnx_chainer.
    'onnx': ['onnx>=1.18', 'onnxruntime>=1.17'],
    # TensorBoardReport writes event files with tensorboardX (no TensorFlow, no PyTorch);
    # tensorboard is the viewer (and the reader) that the tutorial runs.
    'tensorboard': ['tensorboardX>=2.6', 'tensorboard>=2.14'],
    # MLflowReport needs only MLflow's client: mlflow-skinny, without the server's pandas,
    # pyarrow, scikit-learn and scipy.
    'mlflow': ['mlflow-skinny>=3'],
    # researchutils.pytorch: the toolkit's pieces as torch modules (issue 44).
    'torch': ['torch>=2.4'],
    # furo: a maintained theme whose column fits the tutorials' code at a laptop's width
    # (tests/test_docs.py); Sphinx 7.1 wraps long signatures (docs/conf.py).
    'docs': ['sphinx>=7.1', 'furo>=2024.8'],
    # pytest-xdist: `make test` runs each stack's suite on two processes a core.
    # tensorboard: its EventAccumulator reads back TensorBoardReport's files. The MLflow
    # server the tests start (the full mlflow) is installed in one stack's venv only, which
    # serves the others (Makefile, tests/support/mlflow_server.py).
    'test': ['pytest>=7', 'pytest-timeout>=2', 'pytest-xdist>=3', 'ruff>=0.4', 'mypy>=2',
             'tensorboard>=2.14'],
    # `make mutation` (tools/mutation.py; docs/testing.rst says why mutmut).
    'mutation': ['mutmut>=3.8,<4'],
}
extras['all'] = sorted({req for reqs in extras.values() for req in reqs})

setup(
    name='researchutils',
    version=about['__version__'],
    description='Chainer extensions for deep-learning research: gradient-clipping '
                'LSTM, k-step loss, decorable iterators, snapshot helpers, '
                'SlackReport, data-parallel networks and a train/predict API.',
    long_description=long_description,
    long_description_content_type='text/markdown',
    license='MIT',
    packages=find_packages(include=['researchutils', 'researchutils.*',
                                    '_researchutils_chainer_compat']),
    # PEP 561: the marker that tells type checkers to read the annotations of the installed
    # package.
    package_data={'researchutils': ['py.typed']},
    # Tested on Python 3.11-3.13 with NumPy 1.26 and 2.x; what Chainer 7.8.1 (its last
    # release) lacks on those stacks is supplied by the .pth above.
    python_requires='>=3.11',
    install_requires=[
        'chainer>=7.8,<8',
        'numpy>=1.26',
    ],
    extras_require=extras,
    cmdclass={'build_py': build_py_with_pth},
    classifiers=[
        'Programming Language :: Python :: 3',
        'Programming Language :: Python :: 3.11',
        'Programming Language :: Python :: 3.12',
        'Programming Language :: Python :: 3.13',
        'Topic :: Scientific/Engineering :: Artificial Intelligence',
    ],
)
