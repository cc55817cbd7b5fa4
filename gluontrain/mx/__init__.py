"""MXNet / GluonCV backend of gluontrain.

gluoncv is always imported through :mod:`gluontrain.mx._gluoncv`, which makes it importable
beside PyTorch 2.
"""
from ._gluoncv import gluoncv

__all__ = ['gluoncv']
