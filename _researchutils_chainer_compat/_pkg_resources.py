"""The ``pkg_resources`` stand-in Chainer gets where setuptools has none (setuptools >= 81).

Chainer 7.8.1 calls ``pkg_resources.require`` and ``get_distribution`` in its start-up check
of optional dependencies (CuPy, iDeep) and ``WorkingSet().require`` in
``chainer.testing.with_requires``. :func:`pkg_resources` gives those names, and their three
errors, over :mod:`importlib.metadata`. Requirements (:class:`Requirement`) are read as PEP
508 reads them: a name, extras, specifiers (in parentheses too, as in ``'x (>=0.5)'``) or a
URL, and environment markers (:class:`Marker`), evaluated for this interpreter: a
requirement whose markers are false does not apply, and ``require`` skips it. Versions are
compared by :mod:`._versions` (PEP 440).

What it leaves out: a distribution's own dependencies and extras are not resolved (only the
named distribution's version is checked), and nothing else of ``pkg_resources`` exists.
Tests (``tests/test_chainer_compat_pkg_resources.py``) compare it with ``packaging``.
"""
import importlib.metadata
import operator
import re
import sys
import types

from _researchutils_chainer_compat._versions import Specifier, Version

_NAME = r'[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?'
_REQUIREMENT = re.compile(r'^\s*(?P<name>{0})\s*(?:\[(?P<extras>[^\]]*)\])?\s*'
                          r'(?:@\s*(?P<url>\S+)\s*|(?P<specifiers>[^@]*))$'.format(_NAME))
_MARKER_TOKEN = re.compile(r'''\s*(?:(?P<string>'[^']*'|"[^"]*")|(?P<paren>[()])|
    (?P<op>===|==|!=|<=|>=|~=|<|>|not\s+in\b|in\b)|(?P<word>[A-Za-z_][A-Za-z0-9_.]*))''',
                           re.VERBOSE)
_MARKER_VARIABLES = frozenset([
    'implementation_name', 'implementation_version', 'os_name', 'platform_machine',
    'platform_release', 'platform_system', 'platform_version', 'python_full_version',
    'platform_python_implementation', 'python_version', 'sys_platform', 'extra'])
_MARKER_ALIASES = {'os.name': 'os_name', 'sys.platform': 'sys_platform',
                   'platform.version': 'platform_version',
                   'platform.machine': 'platform_machine',
                   'platform.python_implementation': 'platform_python_implementation',
                   'python_implementation': 'platform_python_implementation'}
_STRING_OPERATORS = {'<': operator.lt, '<=': operator.le, '==': operator.eq,
                     '!=': operator.ne, '>=': operator.ge, '>': operator.gt}


def _marker_environment():
    """PEP 508's marker variables for this interpreter (``extra`` empty: none asked for)."""
    import os
    import platform
    info = sys.implementation.version
    implementation_version = '{0.major}.{0.minor}.{0.micro}'.format(info)
    if info.releaselevel != 'final':
        implementation_version += info.releaselevel[0] + str(info.serial)
    return {
        'implementation_name': sys.implementation.name,
        'implementation_version': implementation_version,
        'os_name': os.name,
        'platform_machine': platform.machine(),
        'platform_release': platform.release(),
        'platform_system': platform.system(),
        'platform_version': platform.version(),
        'python_full_version': platform.python_version(),
        'platform_python_implementation': platform.python_implementation(),
        'python_version': '.'.join(platform.python_version_tuple()[:2]),
        'sys_platform': sys.platform,
        'extra': '',
    }


def _marker_tokens(text):
    position, tokens = 0, []
    while text[position:].strip():
        match = _MARKER_TOKEN.match(text, position)
        if match is None:
            raise ValueError('invalid marker {!r} at {!r}'.format(text, text[position:]))
        kind = match.lastgroup
        value = match[kind]
        if kind == 'op':
            value = ' '.join(value.split())                 # 'not   in' -> 'not in'
        elif kind == 'word' and value not in ('and', 'or'):
            kind, value = 'variable', _MARKER_ALIASES.get(value, value)
            if value not in _MARKER_VARIABLES:
                raise ValueError('unknown marker variable {!r} in {!r}'.format(
                    match['word'], text))
        elif kind == 'string':
            value = value[1:-1]
        tokens.append((kind, value))
        position = match.end()
    return tokens


class Marker:
    """PEP 508 environment markers, such as ``python_version >= "3" and os_name != "nt"``.

    A comparison of two versions follows PEP 440 (through :class:`Specifier`); any other
    compares the strings as Python does, and ``in`` / ``not in`` test substrings.

    Example:
        >>> Marker('python_version >= "3" and (os_name == "posix" or os_name == "nt")'
        ...        ).evaluate({'python_version': '3.11', 'os_name': 'nt'})
        True
    """

    def __init__(self, text):
        self.text = text
        self._tokens = _marker_tokens(text)
        if not self._tokens:
            raise self._invalid()
        self._tree, end = self._or(0)
        if end != len(self._tokens):
            raise self._invalid()

    def evaluate(self, environment=None):
        """Whether the markers hold; ``environment`` overrides this interpreter's values."""
        values = _marker_environment()
        values.update(environment or {})
        return _evaluate(self._tree, values)

    # The grammar, each rule giving (tree, position after it):
    #   or := and ('or' and)*    and := atom ('and' atom)*    atom := '(' or ')' | comparison
    def _or(self, position):
        return self._chain('or', self._and, position)

    def _and(self, position):
        return self._chain('and', self._atom, position)

    def _chain(self, word, parse, position):
        tree, position = parse(position)
        while self._token(position) == ('word', word):
            right, position = parse(position + 1)
            tree = (word, tree, right)
        return tree, position

    def _atom(self, position):
        if self._token(position) == ('paren', '('):
            tree, position = self._or(position + 1)
            if self._token(position) != ('paren', ')'):
                raise self._invalid()
            return tree, position + 1
        left, op, right = (self._token(position + i) or (None, None) for i in range(3))
        if op[0] != 'op' or not {left[0], right[0]} <= {'variable', 'string'}:
            raise self._invalid()
        return ('compare', left, op[1], right), position + 3

    def _token(self, position):
        return self._tokens[position] if position < len(self._tokens) else None

    def _invalid(self):
        return ValueError('invalid marker: {!r}'.format(self.text))


def _evaluate(tree, values):
    if tree[0] == 'or':
        return _evaluate(tree[1], values) or _evaluate(tree[2], values)
    if tree[0] == 'and':
        return _evaluate(tree[1], values) and _evaluate(tree[2], values)
    _, left, op, right = tree
    extra = ('variable', 'extra') in (left, right)
    left, right = (values[value] if kind == 'variable' else value for kind, value in (left, right))
    if extra:       # extra names compare as PEP 685 normalises them
        left, right = (re.sub(r'[-_.]+', '-', text).lower() for text in (left, right))
    return _compare(left, op, right)


def _compare(left, op, right):
    if op in ('in', 'not in'):
        return (left in right) == (op == 'in')
    try:
        specifier = Specifier(op + right)
        if op == '===' or Version(left):
            return specifier.contains(left)
    except ValueError:      # not both versions: compare the strings, as Python does
        pass
    if op not in _STRING_OPERATORS:
        raise ValueError('{} compares versions only, not {!r} and {!r}'.format(op, left, right))
    return _STRING_OPERATORS[op](left, right)


class Requirement:
    """A PEP 508 requirement: ``'numpy>=1.26'``, ``'x (>=0.5)'``, ``'x; python_version<"3"'``.

    Example:
        >>> requirement = Requirement('NumPy[dev] (>=1.0, !=1.1) ; python_version >= "3"')
        >>> requirement.name, requirement.applies(), requirement.admits('1.1')
        ('NumPy', True, False)
    """

    def __init__(self, text):
        head, semicolon, markers = text.partition(';')
        match = _REQUIREMENT.match(head)
        if match is None:
            raise ValueError('invalid requirement: {!r}'.format(text))
        self.name = match['name']
        self.marker = Marker(markers) if semicolon else None
        specifiers = (match['specifiers'] or '').strip()
        if specifiers.startswith('(') and specifiers.endswith(')'):
            specifiers = specifiers[1:-1]
        self.specifiers = [Specifier(part) for part in specifiers.split(',') if part.strip()]

    def applies(self):
        """Whether the markers, if any, hold for this interpreter."""
        return self.marker is None or self.marker.evaluate()

    def admits(self, version):
        """Whether the version text ``version`` satisfies every specifier."""
        return all(specifier.contains(version) for specifier in self.specifiers)


def _requirement_texts(requirements):
    for requirement in requirements:
        if isinstance(requirement, str):
            for line in requirement.splitlines() or ['']:
                line = line.split(' #', 1)[0].strip()
                if line and not line.startswith('#'):
                    yield line
        else:
            yield from _requirement_texts(requirement)


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
        # As pkg_resources: the installed distribution if it meets the specifiers; markers
        # are not consulted here.
        parsed = Requirement(requirement)
        try:
            found = importlib.metadata.distribution(parsed.name)
        except importlib.metadata.PackageNotFoundError:
            raise DistributionNotFound(requirement) from None
        distribution = Distribution(found.metadata['Name'] or parsed.name, found.version)
        if not parsed.admits(distribution.version):
            raise VersionConflict(distribution, requirement)
        return distribution

    def require(*requirements):
        return [get_distribution(text) for text in _requirement_texts(requirements)
                if Requirement(text).applies()]

    class WorkingSet:
        """The installed distributions; ``require`` as :func:`require`."""

        def require(self, *requirements):
            return require(*requirements)

    for obj in (ResolutionError, DistributionNotFound, VersionConflict, Distribution,
                WorkingSet, get_distribution, require):
        obj.__module__ = module.__name__
        setattr(module, obj.__name__, obj)
    return module
