"""Task timelines (plotter), drawn with matplotlib.

Needs matplotlib: without it, importing ``researchutils.task`` raises an ImportError
naming the extra to install, ``pip install researchutils[plot]``. The module keeps the
original researchutils' path: ``from researchutils.task import plotter``.
"""
from researchutils.task import plotter

__all__ = ['plotter']
