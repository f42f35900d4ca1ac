"""Images: axis order (converter), the mean image (preprocess), showing and animating (viewer).

Needs matplotlib, for the viewer: without it, importing ``researchutils.image`` raises
an ImportError naming the extra to install, ``pip install researchutils[plot]``.
``converter`` and ``preprocess`` themselves use NumPy only. The modules keep the
original researchutils' paths: ``from researchutils.image import converter,
preprocess, viewer``.
"""
from researchutils.image import converter, preprocess, viewer

__all__ = ['converter', 'preprocess', 'viewer']
