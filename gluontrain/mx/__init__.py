"""MXNet / GluonCV backend of gluontrain.

gluoncv is always imported through :mod:`gluontrain.mx._gluoncv`, which makes it importable
beside PyTorch 2.

On Python >= 3.12, where MXNet 1.9.1 and GluonCV 0.10.5 do not run, importing it raises an
``ImportError`` of one line that says so and what to use instead.
"""
from ..registry import mxnet_python_refusal

if mxnet_python_refusal():
    raise ImportError(mxnet_python_refusal())

from ._gluoncv import gluoncv  # pylint: disable=wrong-import-position

__all__ = ['gluoncv']
