"""The words the argument checks share in their messages. Tests: ``tests/test_checks.py``."""


def none_or(allow_none: bool, kind: str) -> str:
    """Returns ``kind``, with ' or None' where None is accepted too.

    Example:
        >>> none_or(True, 'a str')
        'a str or None'
    """
    return kind + ' or None' if allow_none else kind
