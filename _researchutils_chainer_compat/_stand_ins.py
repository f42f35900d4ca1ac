"""The objects supplied to Chainer where the stack lacks them, each as NumPy 1.x or
setuptools had it, limited to what Chainer 7.8.1 uses.

- :func:`numpy_distutils`: ``numpy.distutils`` with ``system_info.get_info`` (Chainer calls
  it on macOS to warn about Accelerate); it finds no library, so the warning never fires.
- :func:`sctypes`: ``numpy.sctypes``, the table of scalar types by kind.
- :func:`pkg_resources`: ``require``, ``get_distribution``, ``WorkingSet`` and the three
  error classes, over :mod:`importlib.metadata`, for Chainer's optional-dependency check and
  ``chainer.testing.with_requires``. It checks the named distribution's version only, not
  the distribution's own dependencies, and ignores environment markers.
- :func:`wrapped_int`: a Python int cast into a dtype the way NumPy 1.x stored it.
"""
import importlib.metadata
import re
import types


def _get_info(name, notfound_action=0):
    """Stand-in for ``numpy.distutils.system_info.get_info``: finds no library.

    Args:
        name (str): the library section asked for, e.g. ``'blas_opt'``.
        notfound_action (int): accepted for the real signature; ignored.

    Returns:
        dict: ``{}``, what ``numpy.distutils`` returns for a library it did not find.
    """
    return {}


def numpy_distutils():
    """A ``numpy.distutils`` package object whose ``system_info`` has only ``get_info``."""
    package = types.ModuleType('numpy.distutils', 'Stand-in from researchutils for Chainer '
                               '7.8.1: this NumPy has no numpy.distutils.')
    package.__path__ = []
    system_info = types.ModuleType('numpy.distutils.system_info', package.__doc__)
    system_info.get_info = _get_info
    package.system_info = system_info
    return package


def sctypes():
    """``numpy.sctypes`` as NumPy 1.26 built it: kind -> scalar types, one per size."""
    import numpy
    table = {
        'int': [numpy.int8, numpy.int16, numpy.int32, numpy.int64],
        'uint': [numpy.uint8, numpy.uint16, numpy.uint32, numpy.uint64],
        'float': [numpy.float16, numpy.float32, numpy.float64, numpy.longdouble],
        'complex': [numpy.complex64, numpy.complex128, numpy.clongdouble],
        'others': [bool, object, bytes, str, numpy.void],
    }
    for kind in ('float', 'complex'):     # where long double is double, it is listed once
        unique = []
        for scalar in table[kind]:
            if all(numpy.dtype(scalar) != numpy.dtype(kept) for kept in unique):
                unique.append(scalar)
        table[kind] = unique
    return table


def wrapped_int(value, dtype):
    """``value`` (a Python int) as a scalar of ``dtype``, wrapped as NumPy 1.x stored it.

    Example:
        >>> import numpy
        >>> int(wrapped_int(-1, numpy.uint8)), int(wrapped_int(300, numpy.int8))
        (255, 44)
    """
    import numpy
    dtype = numpy.dtype(dtype)
    if dtype.kind in 'iu':
        bits = 8 * dtype.itemsize
        value %= 1 << bits
        if dtype.kind == 'i' and value >= 1 << (bits - 1):
            value -= 1 << bits
    return dtype.type(value)


# --- pkg_resources -----------------------------------------------------------------------

_VERSION = re.compile(r'''
    ^\s*v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>\d*))?
    (?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d*))?
    (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d*))?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$''', re.IGNORECASE | re.VERBOSE)
_PRE_RANK = {'a': 0, 'alpha': 0, 'b': 1, 'beta': 1, 'c': 2, 'rc': 2, 'pre': 2, 'preview': 2}
_SPECIFIER = re.compile(r'^\s*(~=|===|==|!=|<=|>=|<|>)\s*([^\s,;]+)\s*$')
_REQUIREMENT = re.compile(r'^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$')


class _Version:
    """A PEP 440 version; compared as specifiers compare it (its local label ignored)."""

    def __init__(self, text):
        match = _VERSION.match(text)
        if match is None:
            raise ValueError('invalid version: {!r}'.format(text))
        self.text = text
        self.release = tuple(int(part) for part in match['release'].split('.'))
        pre = match['pre_l']
        post = match['post_n1'] or match['post_l']
        dev = match['dev_l']
        self.is_prerelease = bool(pre or dev)
        self.is_postrelease = bool(post)
        release = self.release
        while len(release) > 1 and release[-1] == 0:
            release = release[:-1]
        if pre:
            pre_key = (0, _PRE_RANK[pre.lower()], int(match['pre_n'] or 0))
        elif dev and not post:
            pre_key = (-1,)                   # 1.0.dev0 comes before 1.0a0
        else:
            pre_key = (1,)
        post_key = (int(match['post_n1'] or match['post_n2'] or 0),) if post else (-1,)
        dev_key = (0, int(match['dev_n'] or 0)) if dev else (1,)
        #: PEP 440's order of public versions, the one specifiers compare by.
        self.key = (int(match['epoch'] or 0), release, pre_key, post_key, dev_key)
        local = match['local']
        # A local label sorts after its public version; letters before digits.
        self.sort_key = self.key + ((0,) if local is None else (1,) + tuple(
            (1, int(part), '') if part.isdigit() else (0, 0, part.lower())
            for part in re.split('[-_.]', local)))

    def __eq__(self, other):
        return self.key == other.key

    def __lt__(self, other):
        return self.key < other.key

    def __le__(self, other):
        return self.key <= other.key

    def __repr__(self):
        return self.text


def _prefix_matches(version, pattern):
    prefix = _Version(pattern).release
    return version.release[:len(prefix)] + (0,) * (len(prefix) - len(version.release)) \
        == prefix


def _satisfies(version, operator, target):
    if operator == '===':
        return version.text.strip() == target
    if operator in ('==', '!=') and target.endswith('.*'):
        matches = _prefix_matches(version, target[:-2])
        return matches if operator == '==' else not matches
    wanted = _Version(target)
    if operator == '==':
        return version == wanted
    if operator == '!=':
        return not version == wanted
    if operator == '>=':
        return wanted <= version
    if operator == '<=':
        return version <= wanted
    if operator == '<':
        # PEP 440: `<V` does not admit a pre-release of V itself unless V is one.
        if not wanted.is_prerelease and version.is_prerelease and \
                _Version('.'.join(map(str, version.release))) == wanted:
            return False
        return version < wanted
    if operator == '>':
        # PEP 440: `>V` does not admit a post-release of V unless V is one.
        if not wanted.is_postrelease and version.is_postrelease and \
                _Version('.'.join(map(str, version.release))) == wanted:
            return False
        return wanted < version
    # '~=': at least the target, and the same release but for its last part.
    stem = '.'.join(str(part) for part in wanted.release[:-1])
    return wanted <= version and _prefix_matches(version, stem)


class _Requirement:
    def __init__(self, text):
        text = text.split(';', 1)[0]              # environment markers are not evaluated
        match = _REQUIREMENT.match(text)
        if match is None:
            raise ValueError('invalid requirement: {!r}'.format(text))
        self.name = match[1]
        self.specifiers = []
        for part in filter(None, (p.strip() for p in match[3].split(','))):
            specifier = _SPECIFIER.match(part)
            if specifier is None:
                raise ValueError('invalid requirement: {!r}'.format(text))
            self.specifiers.append(specifier.groups())

    def __contains__(self, version):
        version = _Version(version)
        return all(_satisfies(version, op, target) for op, target in self.specifiers)


def pkg_resources():
    """A ``pkg_resources`` module object with what Chainer 7.8.1 uses of it."""
    module = types.ModuleType('pkg_resources', 'Stand-in from researchutils for Chainer '
                              '7.8.1: this setuptools has no pkg_resources.')

    class ResolutionError(Exception):
        """A requirement cannot be met."""

    class DistributionNotFound(ResolutionError):
        """No installed distribution has the required name."""

    class VersionConflict(ResolutionError):
        """The installed distribution's version does not meet the requirement."""

    class Distribution:
        def __init__(self, project_name, version):
            self.project_name = project_name
            self.key = project_name.lower()
            self.version = version

        def __repr__(self):
            return '{} {}'.format(self.project_name, self.version)

    def get_distribution(requirement):
        name = _Requirement(requirement).name
        try:
            found = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise DistributionNotFound(requirement) from None
        return Distribution(found.metadata['Name'] or name, found.version)

    def require(*requirements):
        found = []
        for requirement in requirements:
            if isinstance(requirement, (list, tuple)):
                found.extend(require(*requirement))
                continue
            distribution = get_distribution(requirement)
            if distribution.version not in _Requirement(requirement):
                raise VersionConflict(distribution, requirement)
            found.append(distribution)
        return found

    class WorkingSet:
        """The installed distributions; ``require`` as :func:`require`."""

        def require(self, *requirements):
            return require(*requirements)

    for obj in (ResolutionError, DistributionNotFound, VersionConflict, Distribution,
                WorkingSet, get_distribution, require):
        obj.__module__ = module.__name__
        setattr(module, obj.__name__, obj)
    return module
