"""Sphinx configuration for researchutils (built with warnings as errors)."""
import os
import sys
import typing

sys.path.insert(0, os.path.abspath('..'))
# Our own Sphinx extensions (docs/_ext): the table each API page opens with.
sys.path.insert(0, os.path.abspath('_ext'))

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
    'public_names',
]
autodoc_member_order = 'bysource'
# Signatures show their annotations, as a reader scanning a page looks for them. They stay
# readable three ways: the aliases of researchutils/_typing.py and NumPy's ArrayLike show by
# name (Chainer's types are Any to the checker, and ArrayLike would expand to a dozen
# lines; this works because the public modules' annotations are strings, from
# `from __future__ import annotations`), types show by their short names, and a signature
# longer than the line below puts one parameter on a line. The docstrings' own types
# ("Variable or ndarray") stay in the parameter lists.
autodoc_typehints = 'signature'
autodoc_typehints_format = 'short'
# The module of those aliases is private: they show by their names alone.
autodoc_type_aliases = {name: name for name in (
    'Array', 'DeviceSpec', 'FloatArray', 'Indices', 'Initializer', 'SavePath', 'Variable',
    'VariableOrArray')}
autodoc_type_aliases.update({'ArrayLike': 'numpy.typing.ArrayLike',
                             'numpy.typing.ArrayLike': 'numpy.typing.ArrayLike'})
python_maximum_signature_line_length = 80
# Chainer's own docstrings use labels of Chainer's docs that do not resolve here.
autodoc_inherit_docstrings = False
autodoc_default_options = {'members': True, 'show-inheritance': True}
# Optional dependencies are imported where used, so nothing needs mocking;
# listed here only so a docs build without the extras still succeeds. researchutils.pytorch
# imports torch at import time: mocked, its pages build on a stack without torch too (the
# public-names tables import their modules under the same mock).
autodoc_mock_imports = ['cupy', 'mpi4py', 'torch']
napoleon_google_docstring = True
napoleon_numpy_docstring = False
nitpicky = False
exclude_patterns = ['_build']
# furo: a maintained theme, whose column fits 90 characters of code at 1280 px
# (tests/test_docs.py).
html_theme = 'furo'
html_title = 'researchutils ' + version
# The pictures live in docs/images: Sphinx copies each one a page shows into the built
# site once (_images/); a static path would copy them a second time, shown by no page.


def _readable_bases(app, name, obj, options, bases):
    """A class's "Bases:" line names classes, not type-checker details: a generic base
    (``PrefetchingIterator[_Handle]``) shows as its class, and a typing protocol the class
    declares it follows (``ChainerExperiment`` is an ``_experiment.settings.Experiment``)
    is left out."""
    classes = [typing.get_origin(base) or base for base in bases]
    bases[:] = [base for base in classes if not getattr(base, '_is_protocol', False)] or [object]


def setup(app):
    app.connect('autodoc-process-bases', _readable_bases)
