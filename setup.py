import os

from setuptools import find_packages, setup

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
    # Chainer 7.8.1 (its last release) imports numpy.distutils, gone in
    # Python 3.12, uses np.sctypes, gone in NumPy 2, and imports pkg_resources,
    # gone in setuptools 81.
    python_requires='>=3.8,<3.12',
    install_requires=[
        'chainer>=7.8,<8',
        'numpy>=1.17,<2',
        'setuptools<81',
    ],
    extras_require=extras,
    classifiers=[
        'Programming Language :: Python :: 3',
        'Programming Language :: Python :: 3.8',
        'Programming Language :: Python :: 3.9',
        'Programming Language :: Python :: 3.10',
        'Programming Language :: Python :: 3.11',
        'Topic :: Scientific/Engineering :: Artificial Intelligence',
    ],
)
