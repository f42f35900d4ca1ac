"""The start methods of ``multiprocessing`` that the worker-process tests run under.

``fork`` copies the main process; ``spawn`` and ``forkserver`` send the workers
their source pickled, and under ``forkserver`` a worker's parent is the fork
server, not the main process.
"""
import contextlib
import multiprocessing

START_METHODS = ('fork', 'spawn', 'forkserver')
# The start methods that send the workers their dataset and functions pickled.
PICKLING_START_METHODS = ('spawn', 'forkserver')


@contextlib.contextmanager
def using_start_method(method):
    """Makes ``method`` the process-wide start method inside the block, then restores it."""
    previous = multiprocessing.get_start_method(allow_none=True)
    multiprocessing.set_start_method(method, force=True)
    try:
        yield method
    finally:
        multiprocessing.set_start_method(previous, force=True)
