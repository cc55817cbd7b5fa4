"""The one place gluontrain imports gluoncv.

gluoncv 0.10.5 probes for PyTorch at import time and raises when ``torch>=2`` is importable,
although its MXNet half never touches torch. Hiding torch from that single probe lets both
frameworks live in one process. Every MXNet module of gluontrain imports gluoncv from here.
"""
import sys

_ABSENT = object()


def _import_gluoncv():
    saved = sys.modules.get('torch', _ABSENT)
    # A None entry makes ``import torch`` raise ImportError, which gluoncv treats as "no torch".
    sys.modules['torch'] = None
    try:
        import gluoncv as _gcv  # pylint: disable=import-outside-toplevel
    finally:
        if saved is _ABSENT:
            del sys.modules['torch']
        else:
            sys.modules['torch'] = saved
    return _gcv


gluoncv = _import_gluoncv()
