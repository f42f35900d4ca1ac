"""CHANGELOG.md's newest release is the version the package says it is."""
import os
import re

import researchutils

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _released_versions():
    with open(os.path.join(ROOT, 'CHANGELOG.md'), encoding='utf-8') as f:
        return re.findall(r'^## \[(\d+\.\d+\.\d+)\]', f.read(), flags=re.M)


def test_the_newest_release_in_the_changelog_is_the_package_version():
    assert _released_versions()[0] == researchutils.__version__


def test_the_changelog_lists_releases_newest_first():
    versions = [tuple(map(int, v.split('.'))) for v in _released_versions()]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
