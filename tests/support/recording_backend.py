"""A matplotlib backend standing for a display, for tests of code that shows figures.

Select it with ``MPLBACKEND=module://tests.support.recording_backend`` (with the
repository root on ``PYTHONPATH``). It draws with Agg and, instead of opening a window,
appends one line per ``pyplot.show`` call to the file named by
``RECORDING_BACKEND_LOG``: ``show block=<value of block>``. A blocking show returns at
once, as if the user closed the window.
"""
import os

from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg


def _record(line):
    with open(os.environ['RECORDING_BACKEND_LOG'], 'a') as f:
        f.write(line + '\n')


class FigureManager(FigureManagerBase):
    pass


class FigureCanvas(FigureCanvasAgg):
    manager_class = FigureManager


def show(*, block=None):
    _record('show block={}'.format(block))
