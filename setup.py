import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# Chainer 7.8.1 imports numpy.distutils, which NumPy leaves out of its Python 3.12 wheels.
# This one line, installed as a .pth file at the top of site-packages, runs at every
# interpreter start; on 3.12 it imports researchutils/_py312_compat.py, which registers a
# meta-path finder supplying numpy.distutils.system_info only where NumPy has none. It
# imports nothing else (no NumPy), so `import chainer` works first thing in any script.
PTH_NAME = 'researchutils_py312_compat.pth'
PTH_LINE = ("import sys; sys.version_info[:2] == (3, 12) and "
            "__import__('researchutils._py312_compat')\n")


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
        with open(os.path.join(root, PTH_NAME), 'w', encoding='utf-8') as f:
            f.write(PTH_LINE)


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
    'docs': ['sphinx>=5'],
    'test': ['pytest>=7', 'pytest-timeout>=2', 'ruff>=0.4'],
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
    packages=find_packages(include=['researchutils', 'researchutils.*']),
    # Chainer 7.8.1 (its last release) uses np.sctypes, gone in NumPy 2, which has the
    # only wheels for Python 3.13, and imports pkg_resources, gone in setuptools 81.
    # Its numpy.distutils import (gone in Python 3.12) is met by the .pth above.
    python_requires='>=3.8,<3.13',
    install_requires=[
        'chainer>=7.8,<8',
        'numpy>=1.17,<2',
        'setuptools<81',
    ],
    extras_require=extras,
    cmdclass={'build_py': build_py_with_pth},
    classifiers=[
        'Programming Language :: Python :: 3',
        'Programming Language :: Python :: 3.8',
        'Programming Language :: Python :: 3.9',
        'Programming Language :: Python :: 3.10',
        'Programming Language :: Python :: 3.11',
        'Programming Language :: Python :: 3.12',
        'Topic :: Scientific/Engineering :: Artificial Intelligence',
    ],
)
