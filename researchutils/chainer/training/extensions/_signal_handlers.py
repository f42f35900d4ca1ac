"""The handlers PreemptionSnapshot puts in place for a run, and puts back after it (private).

:class:`InstalledHandlers` installs one handler for several signals and, at the end of
the run, puts back exactly what was there before: Python's handler (or ``SIG_DFL``,
``SIG_IGN``) and the C-level action under it. The C level matters for a handler set
outside Python (an embedding program, ``python -X faulthandler`` for SIGABRT):
``signal.getsignal`` returns None for it and ``signal.signal`` cannot set it again, so
its ``sigaction`` is read before ours is installed and written back after (through
ctypes; where the C library cannot be reached, such a handler comes back as
``SIG_DFL``, the nearest Python can set). Python's own record of it then says
``SIG_DFL`` (``signal.getsignal``), as Python cannot record a handler it did not set,
but the handler that runs is the one that was there. Installing again after a restore starts
afresh, so one extension serves several runs in turn.

Tests: tests/chainer/training/extensions/test_preemption_snapshot_handlers.py.
"""
from __future__ import annotations

import ctypes
import functools
import signal
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any, TypeAlias

# What ``signal.signal`` takes as a handler and returns as the one it replaced (None: a
# handler set outside Python).
_Handler: TypeAlias = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

# A handler can never be installed for these.
_UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}
# More than any C library's struct sigaction (glibc's is 152 bytes on x86-64).
_SIGACTION_BYTES = 512


def signal_name(signal_number: int) -> str:
    """``'SIGTERM'``, or ``'signal N'`` for a number without a name."""
    try:
        return signal.Signals(signal_number).name
    except ValueError:
        return 'signal {}'.format(signal_number)


def check_signals(signals: Iterable[int]) -> tuple[signal.Signals, ...]:
    """Returns ``signals`` as a tuple of distinct ``signal.Signals``, or raises naming the
    value that is not a signal a process can handle."""
    try:
        numbers = list(signals)
    except TypeError:
        raise TypeError('signals must be an iterable of signal numbers, got {!r}'.format(
            signals)) from None
    if not numbers:
        raise ValueError('signals must name at least one signal, got {!r}'.format(signals))
    valid = signal.valid_signals()
    checked: list[signal.Signals] = []
    for number in numbers:
        if isinstance(number, bool) or not isinstance(number, int):
            raise TypeError('signals must hold signal numbers (signal.SIGTERM...), got {!r} '
                            'in {!r}'.format(number, signals))
        if number not in valid:
            raise ValueError('signals holds {!r}, which is not a signal of this '
                             'system'.format(number))
        if number in _UNCATCHABLE:
            raise ValueError('signals holds {}, which no process can handle; a cluster '
                             'sends SIGTERM or SIGUSR1 before it'.format(signal_name(number)))
        if number not in checked:
            checked.append(signal.Signals(number))
    return tuple(checked)


@functools.lru_cache(maxsize=None)
def _sigaction() -> Callable[..., int] | None:
    """The C library's ``sigaction``, or None where it cannot be reached."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sigaction
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


def _c_action(number: int) -> ctypes.Array[ctypes.c_char] | None:
    """The C-level action of signal ``number``, as opaque bytes; None if unknown."""
    sigaction = _sigaction()
    if sigaction is None:
        return None
    action = ctypes.create_string_buffer(_SIGACTION_BYTES)
    return action if sigaction(number, None, action) == 0 else None


class InstalledHandlers(object):
    """The handlers in place before :meth:`install`, put back by :meth:`restore`."""

    def __init__(self) -> None:
        self._previous: dict[int, tuple[_Handler, ctypes.Array[ctypes.c_char] | None]] = {}

    def install(self, numbers: Iterable[int],
                handler: Callable[[int, FrameType | None], object]) -> None:
        """Makes ``handler`` the handler of each of ``numbers`` (from the main thread)."""
        for number in numbers:
            if number not in self._previous:
                action = _c_action(number)
                self._previous[number] = (signal.signal(number, handler), action)

    def restore(self) -> None:
        """Puts back every handler :meth:`install` replaced; calling it again does nothing."""
        previous, self._previous = self._previous, {}
        for number, (handler, action) in previous.items():
            # Python's own record first; then the C level as it was, which is what a
            # handler set outside Python (None here) only has.
            signal.signal(number, signal.SIG_DFL if handler is None else handler)
            sigaction = _sigaction()  # not None when an action was read
            if action is not None and sigaction is not None:
                sigaction(number, action, None)
