"""Names as MLflow takes them: metric and parameter names cleaned and cut to MLflow's limits.

MLflow refuses a metric or parameter name with characters other than letters, digits and
``_ - . /`` and space, one that changes as a path, or one longer than 250 characters
(``mlflow.utils.validation``); a parameter's value is cut at 6000 characters and a tag's at
8000. :func:`mlflow_name` makes a name MLflow takes. Tests:
tests/chainer/training/extensions/test_mlflow_report.py.
"""
from __future__ import annotations

import posixpath
import re

__all__ = ['MAX_NAME', 'MAX_PARAM_VALUE', 'MAX_TAG_VALUE', 'mlflow_name']

_NAME_CHARACTERS = re.compile(r'[^\w\-. /]')
MAX_NAME = 250
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000


def mlflow_name(name: str) -> str:
    """``name`` as MLflow accepts a metric or parameter name: a character it refuses becomes
    ``_``, a name that would change as a path (``a//b``, ``/a``, ``a/``) is made one that
    does not, and a longer one than 250 characters is cut.

    Example:
        >>> mlflow_name('main/loss'), mlflow_name('val/acc@1'), mlflow_name('/a//b/')
        ('main/loss', 'val/acc_1', 'a/b')
    """
    name = _NAME_CHARACTERS.sub('_', name)
    parts = [part for part in name.split('/') if part not in ('', '.')]
    name = '/'.join(part if part != '..' else '__' for part in parts) or '_'
    name = name[:MAX_NAME].rstrip('/')
    if posixpath.normpath(name) != name:  # a cut left a '/.' or the like
        name = name.replace('/', '_')
    return name
