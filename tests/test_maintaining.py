"""docs/maintaining.rst's module map names every module of the package, and only those."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ('researchutils', '_researchutils_chainer_compat')


def _modules_on_disk():
    found = set()
    for package in PACKAGES:
        for folder, _, names in os.walk(os.path.join(ROOT, package)):
            found.update(os.path.relpath(os.path.join(folder, name), ROOT)
                         for name in names if name.endswith('.py'))
    return found


def _modules_in_the_map():
    with open(os.path.join(ROOT, 'docs', 'maintaining.rst'), encoding='utf-8') as f:
        text = f.read()
    section = text[text.index('**At the top of site-packages**'):
                   text.index('Which way imports point\n')]
    listed = set()
    for path in re.findall(r'``([\w/]+\.py)``', section):
        # Paths in the map are relative to researchutils/, except the compat package's.
        listed.add(path if path.startswith(PACKAGES[1] + '/')
                   else os.path.join('researchutils', path))
    return listed


def test_the_module_map_lists_every_module():
    assert sorted(_modules_on_disk() - _modules_in_the_map()) == []


def test_the_module_map_lists_only_modules_that_exist():
    assert sorted(_modules_in_the_map() - _modules_on_disk()) == []
