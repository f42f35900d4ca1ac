"""Sphinx configuration for researchutils (built with warnings as errors)."""
import os
import sys
import typing

sys.path.insert(0, os.path.abspath('..'))

from researchutils._version import __version__  # noqa: E402

project = 'researchutils'
author = 'researchutils developers'
copyright = '2026, researchutils developers'
version = release = __version__

extensions = [
    'sphinx.ext.autodoc',
    'sphinx.ext.napoleon',
    'sphinx.ext.mathjax',
    'sphinx.ext.viewcode',
    'sphinx.ext.doctest',
]
autodoc_member_order = 'bysource'
# Annotations go into the parameter list, where the docstring gives no type, not into the
# signature: Chainer's types are Any to the checker and NumPy's ArrayLike expands to a
# dozen lines, so signatures stay as users call them and the docstrings' types
# ("Variable or ndarray") are what the reader sees.
autodoc_typehints = 'description'
# Chainer's own docstrings use labels of Chainer's docs that do not resolve here.
autodoc_inherit_docstrings = False
autodoc_default_options = {'members': True, 'show-inheritance': True}
# Optional dependencies are imported where used, so nothing needs mocking;
# listed here only so a docs build without the extras still succeeds.
autodoc_mock_imports = ['cupy', 'mpi4py']
napoleon_google_docstring = True
napoleon_numpy_docstring = False
nitpicky = False
exclude_patterns = ['_build']
# furo: a maintained theme, whose column fits 90 characters of code at 1280 px
# (tests/test_docs.py).
html_theme = 'furo'
html_static_path = ['_static']


def _readable_bases(app, name, obj, options, bases):
    """A class's "Bases:" line names classes, not type-checker details: a generic base
    (``PrefetchingIterator[_Handle]``) shows as its class, and a typing protocol the class
    declares it follows (``ChainerExperiment`` is an ``_experiment.settings.Experiment``)
    is left out."""
    classes = [typing.get_origin(base) or base for base in bases]
    bases[:] = [base for base in classes if not getattr(base, '_is_protocol', False)] or [object]


def setup(app):
    app.connect('autodoc-process-bases', _readable_bases)
