"""``.. public-names:: module [module ...]``: the table an API page opens with.

One row per public name (each module's ``__all__``, in its order): the name, linked to its
entry further down the page, and the first sentence of its docstring. It is Sphinx's
autosummary table, fed from ``__all__`` so that a name added to a module appears without
editing the page. A name in the table that the page does not document is a warning (an
error in ``make docs``): the row would link nowhere.
"""
import importlib

from docutils.statemachine import StringList
from sphinx.ext.autodoc.mock import mock
from sphinx.ext.autosummary import Autosummary
from sphinx.util import logging

logger = logging.getLogger(__name__)


class PublicNames(Autosummary):
    required_arguments = 1
    optional_arguments = 20
    has_content = False
    option_spec = {}

    def run(self):
        names = []
        for module_name in self.arguments:
            # As autodoc imports it: a dependency the stack lacks (torch) is mocked.
            with mock(self.config.autodoc_mock_imports):
                module = importlib.import_module(module_name)
            names += ['~{}.{}'.format(module_name, name) for name in module.__all__]
        self.content = StringList(names)
        self.options['nosignatures'] = True
        env = self.env
        listed = env.domaindata.setdefault('public_names', {})
        listed.setdefault(env.docname, []).extend(
            (name[1:], self.lineno) for name in names)
        return super().run()


def _purge(app, env, docname):
    env.domaindata.get('public_names', {}).pop(docname, None)


def _merge(app, env, docnames, other):
    env.domaindata.setdefault('public_names', {}).update(
        {name: rows for name, rows in other.domaindata.get('public_names', {}).items()
         if name in docnames})


def _check_documented(app, env):
    objects = env.get_domain('py').objects
    for docname, rows in sorted(env.domaindata.get('public_names', {}).items()):
        for name, line in rows:
            entry = objects.get(name)
            if entry is None or entry.docname != docname:
                logger.warning('public-names: %s is in the table but not documented on this '
                               'page (its row would link nowhere)', name,
                               location=(docname, line))


def setup(app):
    app.setup_extension('sphinx.ext.autosummary')
    app.add_directive('public-names', PublicNames)
    app.connect('env-purge-doc', _purge)
    app.connect('env-merge-info', _merge)
    app.connect('env-check-consistency', _check_documented)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
