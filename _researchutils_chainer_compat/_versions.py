"""PEP 440 versions and specifiers, for the ``pkg_resources`` stand-in of ``._pkg_resources``.

:class:`Version` orders versions as PEP 440 does: epochs, pre-, post- and dev-releases and
local labels (``1.0 < 1.0.post1.dev0 < 1.0.post1``). :class:`Specifier` admits them as PEP 440
says and as ``packaging`` (what setuptools' ``pkg_resources`` used) does, pre-releases
included as ``pkg_resources`` included them: ``===`` compares the text, without case; ``==``
and ``!=`` take a ``.*`` prefix or a local label; ``<V`` admits no pre-release of ``V`` and
``>V`` no post-release or local version of ``V`` (unless ``V`` is one).

Tests: ``tests/test_chainer_compat_pkg_resources.py`` compares both with ``packaging``.
"""
import re

_VERSION = re.compile(r'''
    ^\s*v?
    (?:(?P<epoch>\d+)!)?
    (?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>\d+)?)?
    (?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?
    (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$''', re.IGNORECASE | re.VERBOSE)
_PRE_KIND = {'a': 'a', 'alpha': 'a', 'b': 'b', 'beta': 'b',
             'c': 'rc', 'rc': 'rc', 'pre': 'rc', 'preview': 'rc'}
_PREFIX = re.compile(r'^\s*v?(?:\d+!)?\d+(?:\.\d+)*\s*$', re.IGNORECASE)
_SPECIFIER = re.compile(r'^\s*(===|~=|==|!=|<=|>=|<|>)\s*(\S+)\s*$')


class Version:
    """A PEP 440 version, ordered as PEP 440 orders versions.

    Example:
        >>> Version('1.0') < Version('1.0.post1.dev0') < Version('1.0.post1')
        True
        >>> Version('1!0.5') > Version('2.0'), Version('1.0+abc') == Version('1.0')
        (True, False)
    """

    def __init__(self, text):
        match = _VERSION.match(text)
        if match is None:
            raise ValueError('invalid version: {!r}'.format(text))
        release = tuple(int(part) for part in match['release'].split('.'))
        self.release = release
        self.epoch = int(match['epoch'] or 0)
        pre = match['pre_l'] and (_PRE_KIND[match['pre_l'].lower()], int(match['pre_n'] or 0))
        post = match['post_n1'] or (match['post_l'] and (match['post_n2'] or '0'))
        dev = match['dev_l'] and int(match['dev_n'] or 0)
        self.is_prerelease = bool(pre) or dev is not None
        self.is_postrelease = bool(post)
        local = match['local']
        self.local = local and tuple(int(part) if part.isdigit() else part.lower()
                                     for part in re.split('[-_.]', local))
        while len(release) > 1 and release[-1] == 0:
            release = release[:-1]
        #: (epoch, release): equal for a release and its pre-, post- and dev-releases.
        self.base = (self.epoch, release)
        if pre:
            pre_key = (0,) + pre
        else:       # a dev release alone comes before the pre-releases: 1.0.dev0 < 1.0a0
            pre_key = (-1,) if dev is not None and not post else (1,)
        post_key = (0, int(post)) if post else (-1,)
        #: The order of public versions, the one specifiers compare by (no local label).
        self.public = self.base + (pre_key, post_key, (1,) if dev is None else (0, dev))
        # What `<V` and `>V` ask: is this a pre-release of V (same release and post part),
        # a post-release of V (same release and pre part)?
        self.release_and_post = self.base + (post_key,)
        self.release_and_pre = self.base + (pre_key,)
        # A local label sorts after its public version; its numbers after its words.
        self.key = self.public + ((1,) + tuple((1, part) if isinstance(part, int) else
                                               (0, part) for part in self.local)
                                  if self.local else (0,),)

    def __eq__(self, other):
        return self.key == other.key

    def __lt__(self, other):
        return self.key < other.key

    def __le__(self, other):
        return self.key <= other.key

    def __gt__(self, other):
        return self.key > other.key

    def __ge__(self, other):
        return self.key >= other.key

    def __hash__(self):
        return hash(self.key)


def _release_prefix_matches(version, prefix_text):
    """Whether ``version`` is in ``==prefix_text.*`` (same epoch, release starting so)."""
    prefix = Version(prefix_text)
    release = version.release + (0,) * (len(prefix.release) - len(version.release))
    return version.epoch == prefix.epoch and release[:len(prefix.release)] == prefix.release


class Specifier:
    """One PEP 440 specifier, such as ``'>=1.0'``, ``'==1.*'`` or ``'===1.0RC1'``.

    Pre-releases are admitted as ``pkg_resources`` admitted them (as
    ``packaging``'s ``contains(version, prereleases=True)``).

    Example:
        >>> Specifier('<1!2.0').contains('1!2.0a1'), Specifier('~=1.0').contains('1!1.5')
        (False, False)
        >>> Specifier('==1.0.0+0').contains('1.0'), Specifier('===1.0RC1').contains('1.0rc1')
        (False, True)
    """

    def __init__(self, text):
        match = _SPECIFIER.match(text)
        if match is None:
            raise ValueError('invalid specifier: {!r}'.format(text))
        self.operator, self.target = match.groups()
        if self.operator == '===':
            return
        self.prefix = self.operator in ('==', '!=') and self.target.endswith('.*')
        if self.prefix:
            if not _PREFIX.match(self.target[:-2]):
                raise ValueError('invalid specifier: {!r}'.format(text))
            return
        try:
            self.version = Version(self.target)
        except ValueError:
            raise ValueError('invalid specifier: {!r}'.format(text)) from None
        if self.version.local and self.operator not in ('==', '!=') or \
                self.operator == '~=' and len(self.version.release) < 2:
            raise ValueError('invalid specifier: {!r}'.format(text))

    def contains(self, text):
        """Whether the version ``text`` satisfies this specifier (an invalid one never does,
        except under ``===``)."""
        if self.operator == '===':
            return text.lower() == self.target.lower()
        try:
            version = Version(text)
        except ValueError:
            return False
        if self.prefix:
            return _release_prefix_matches(version, self.target[:-2]) == (self.operator == '==')
        wanted = self.version
        if self.operator in ('==', '!='):
            same = version.key == wanted.key if wanted.local else version.public == wanted.public
            return same == (self.operator == '==')
        if self.operator == '<=':
            return version.public <= wanted.public
        if self.operator == '>=':
            return version.public >= wanted.public
        if self.operator == '<':       # not a pre-release of the wanted version itself
            return version.public < wanted.public and not (
                version.is_prerelease and not wanted.is_prerelease
                and version.release_and_post == wanted.release_and_post)
        if self.operator == '>':       # nor its post-release, nor itself with a local label
            return version.public > wanted.public and not (
                version.is_postrelease and not wanted.is_postrelease
                and version.release_and_pre == wanted.release_and_pre)
        stem = '.'.join(str(part) for part in wanted.release[:-1])       # '~='
        return version.public >= wanted.public and _release_prefix_matches(
            version, '{}!{}'.format(wanted.epoch, stem))
