"""Kept for ``researchutils_py312_compat.pth`` lines left by researchutils 0.1 installs.

Those lines import this module on Python 3.12. Importing it imports researchutils, which
installs the finder of :mod:`_researchutils_chainer_compat` where none is installed, so an
old line left beside a new install changes nothing. New installs write
``researchutils_chainer_compat.pth`` instead.
"""
