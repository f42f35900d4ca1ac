"""The pkg_resources stand-in of _researchutils_chainer_compat (used by Chainer where
setuptools has no pkg_resources), against ``packaging``, the reference setuptools used: PEP
440 versions and specifiers on a table of cases, PEP 508 requirements and markers, and the
errors ``require`` and ``get_distribution`` raise for what is installed here.
"""
import importlib
import itertools
import sys
import unittest

import numpy as np
import pytest

from _researchutils_chainer_compat import _pkg_resources, _versions


def _packaging(module):
    """``packaging.<module>``, or pip's own copy where packaging is not installed."""
    try:
        return importlib.import_module('packaging.' + module)
    except ImportError:
        return pytest.importorskip('pip._vendor.packaging.' + module)


packaging_version = _packaging('version')
packaging_specifiers = _packaging('specifiers')
packaging_markers = _packaging('markers')
packaging_requirements = _packaging('requirements')

RELEASES = ['1', '1.0', '1.0.0', '1.1', '2.0', '0.9', '1!1.0', '1!2.0', '1!1.5']
SUFFIXES = ['', 'a1', 'b2', 'rc1', 'RC1', '.dev0', '.post1', '.post1.dev0', 'a1.dev1', '-1',
            '+abc', '+xyz', '+0', '.post1+abc', 'rc1+abc', 'c1', '.rev2', 'alpha1', '-pre2']
VERSIONS = [r + s for r, s in itertools.product(RELEASES, SUFFIXES)] + [
    'v1.0', '1.0.0.0', '1.0-RC1', '1.0+ABC', '1.0+abc.5', '1.0+abc.10', '1.0+5',
    '1.0+abc-def', '26.4', '7.8.1']
INVALID_VERSIONS = ['garbage', '1.0.', '1.0+', '1..0', '']
OPERATORS = ['<', '<=', '>', '>=', '==', '!=', '~=', '===']
TARGETS = ['1.0', '1', '1.0.0', '1!2.0', '1!1.0', '2.0', '1.0rc1', '1.0RC1', '1.0.post1',
           '1.0+xyz', '1.0.0+0', '1.0+abc', '1.0.dev0', '1.*', '1.0.*', '1!1.*', '1.0.0.*',
           '0.9', '1.0a1', '1.0.post1.dev0', '2', '1.0rc1.*', 'garbage']

# The cases, spelled out: (specifier, version, admitted).
NAMED_CASES = [
    ('<1!2.0', '1!2.0a1', False), ('~=1.0', '1!1.5', False), ('==1.*', '1!1.0', False),
    ('==1.0+xyz', '1.0+abc', False), ('==1.0.0+0', '1.0', False), ('==1.0.0+0', '1.0+0', True),
    ('===1.0RC1', '1.0rc1', True), ('===1.0rc1', '1.0-rc1', False), ('>=0.5', '0.5', True),
    ('<1.0.post1', '1.0.post1.dev0', False), ('<1.0.post1', '1.0rc1', True),
    ('>1.0', '1.0.post1', False), ('>1.0', '1.0+abc', False), ('>1.0rc1', '1.0+abc', True),
    ('==1.0', '1.0+abc', True), ('!=1.0', '1.0+abc', False),
]


def test_versions_compare_as_packaging_compares_them():
    for a, b in itertools.product(VERSIONS, VERSIONS):
        ours, theirs = (_versions.Version(a), _versions.Version(b)), \
            (packaging_version.Version(a), packaging_version.Version(b))
        assert (ours[0] < ours[1], ours[0] == ours[1]) == \
            (theirs[0] < theirs[1], theirs[0] == theirs[1]), (a, b)


def test_a_post_dev_release_is_between_its_release_and_its_post_release():
    release, post_dev, post = (_versions.Version(v) for v in
                               ('1.0', '1.0.post1.dev0', '1.0.post1'))
    assert release < post_dev < post and not post_dev < release
    assert sorted([post, post_dev, release], key=lambda v: v.key) == [release, post_dev, post]


@pytest.mark.parametrize('text', INVALID_VERSIONS)
def test_invalid_versions_are_refused_as_packaging_refuses_them(text):
    with pytest.raises(packaging_version.InvalidVersion):
        packaging_version.Version(text)
    with pytest.raises(ValueError, match='invalid version'):
        _versions.Version(text)


@pytest.mark.parametrize('operator', OPERATORS)
def test_specifiers_admit_what_packaging_admits(operator):
    for target in TARGETS:
        text = operator + target
        try:
            reference = packaging_specifiers.Specifier(text)
        except packaging_specifiers.InvalidSpecifier:
            with pytest.raises(ValueError, match='invalid specifier'):
                _versions.Specifier(text)
            continue
        ours = _versions.Specifier(text)
        for version in VERSIONS + INVALID_VERSIONS:
            assert ours.contains(version) == reference.contains(version, prereleases=True), \
                (text, version)


@pytest.mark.parametrize('specifier,version,admitted', NAMED_CASES)
def test_named_cases_of_pep_440(specifier, version, admitted):
    reference = packaging_specifiers.Specifier(specifier).contains(version, prereleases=True)
    assert reference == admitted                  # the table says what packaging says
    assert _versions.Specifier(specifier).contains(version) == admitted


MARKERS = [
    'python_version >= "3"', 'python_version < "3"', "python_version>='3'",
    '"3" <= python_version', 'python_version == "3.*"', 'python_full_version >= "3.11.0"',
    'sys_platform == "linux"', 'sys_platform == "win32"', 'os_name != "nt"',
    'os_name == "posix" and python_version >= "3"', 'os_name == "nt" or python_version >= "3"',
    '(os_name == "nt" or sys_platform == "darwin") and python_version >= "3"',
    'os_name == "nt" or sys_platform == "darwin" and python_version >= "3"',
    '"linux" in sys_platform', '"lin" not in sys_platform',
    'python_version in "3.10 3.11 3.12 3.13"', 'platform_python_implementation == "CPython"',
    "python_implementation == 'CPython'", 'os.name == "posix"', 'sys.platform == "linux"',
    'implementation_name == "cpython"', 'implementation_version >= "3"',
    'extra == "test"', 'extra != "test"', 'python_version ~= "3.0"',
    'python_version === "3.11"', 'python_version > "3.10"', 'python_version != "3.11"',
    'platform_system == "Linux"',
]
ENVIRONMENTS = [None, {'python_version': '2.7', 'python_full_version': '2.7.18'},
                {'sys_platform': 'win32', 'os_name': 'nt', 'python_version': '3.10'},
                {'sys_platform': 'darwin', 'os_name': 'posix', 'python_version': '3.11'}]


@pytest.mark.parametrize('environment', ENVIRONMENTS, ids=str)
def test_markers_evaluate_as_packaging_evaluates_them(environment):
    for text in MARKERS:
        reference = packaging_markers.Marker(text).evaluate(environment)
        assert _pkg_resources.Marker(text).evaluate(environment) == reference, text


@pytest.mark.parametrize('text', ['python_version >= ', 'python_version >= "3" and',
                                  'no_such_variable == "1"', '(python_version >= "3"',
                                  'python_version "3"', ''])
def test_invalid_markers_are_refused_as_packaging_refuses_them(text):
    with pytest.raises(packaging_markers.InvalidMarker):
        packaging_markers.Marker(text)
    with pytest.raises(ValueError):
        _pkg_resources.Marker(text)


REQUIREMENTS = ['x>=1.0', 'x (>=0.5)', 'x(>=0.5,<2)', 'x[a,b]>=1', 'x [a] (==1.*)',
                'x; python_version < "3"', 'x>=1; python_version>="3"',
                'x @ https://example.com/x.whl', 'x @ https://example.com/x.whl ; os_name=="nt"',
                'x >= 1 , < 2', 'x==1.0+abc', 'x===foo', 'x.y_z-w>=1', 'x>=1,']
INVALID_REQUIREMENTS = ['_x', 'x-', 'x>=1.0.*', 'x ~= 1', 'x<=1.0+abc', 'x (>=1', 'x 1.0',
                        'x>=1 ;', '>=1']


@pytest.mark.parametrize('text', REQUIREMENTS)
def test_requirements_read_as_packaging_reads_them(text):
    reference = packaging_requirements.Requirement(text)
    ours = _pkg_resources.Requirement(text)
    assert ours.name == reference.name
    assert sorted(s.operator + s.target for s in ours.specifiers) == \
        sorted(str(s) for s in reference.specifier)
    assert (ours.marker is None) == (reference.marker is None)
    assert ours.applies() == (reference.marker is None or reference.marker.evaluate())
    for version in ['0.9', '1.0', '1.0+abc', '1.5', '2.0', 'foo']:
        assert ours.admits(version) == reference.specifier.contains(version, prereleases=True)


@pytest.mark.parametrize('text', INVALID_REQUIREMENTS)
def test_invalid_requirements_are_refused_as_packaging_refuses_them(text):
    with pytest.raises(packaging_requirements.InvalidRequirement):
        packaging_requirements.Requirement(text)
    with pytest.raises(ValueError):
        _pkg_resources.Requirement(text)


# --- the module Chainer gets ----------------------------------------------------------

@pytest.fixture
def resources():
    return _pkg_resources.pkg_resources()


def test_require_and_get_distribution_find_what_is_installed(resources):
    numpy_dist, = resources.require('numpy>=1.26')
    assert numpy_dist.version == np.__version__
    assert resources.get_distribution('NumPy').version == np.__version__
    assert resources.get_distribution('numpy (>=0.5)').version == np.__version__
    assert [d.version for d in resources.require(['numpy', 'numpy>=1\n# a comment'])] == \
        [np.__version__] * 2


def test_get_distribution_raises_version_conflict_for_a_version_outside_the_requirement(
        resources):
    with pytest.raises(resources.VersionConflict):
        resources.get_distribution('numpy<1.0')
    with pytest.raises(resources.VersionConflict):
        resources.WorkingSet().require('numpy<1.0')
    with pytest.raises(resources.DistributionNotFound):
        resources.require('no-such-distribution-here>=1')
    assert issubclass(resources.VersionConflict, resources.ResolutionError)
    assert issubclass(resources.DistributionNotFound, resources.ResolutionError)


def test_a_requirement_whose_markers_are_false_does_not_apply(resources):
    later = 'python_version >= "{}.{}"'.format(sys.version_info[0], sys.version_info[1] + 1)
    assert resources.require('numpy<1.0; ' + later) == []
    assert resources.require('no-such-distribution-here; ' + later) == []
    with pytest.raises(resources.VersionConflict):
        resources.require('numpy<1.0; python_version >= "3"')
    numpy_dist, = resources.require('numpy>=1; python_version>="3"')
    assert numpy_dist.version == np.__version__


def test_chainer_testing_with_requires_skips_by_version_and_markers():
    from chainer import testing
    assert testing.with_requires('numpy>=1.0')(lambda: 'ran')() == 'ran'
    assert testing.with_requires('numpy<1.0; python_version < "3"')(lambda: 'ran')() == 'ran'
    with pytest.raises(unittest.SkipTest):
        testing.with_requires('numpy<1.0')(lambda: None)()
    with pytest.raises(unittest.SkipTest):
        testing.with_requires('numpy (<1.0)')(lambda: None)()
