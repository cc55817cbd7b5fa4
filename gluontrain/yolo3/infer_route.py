"""``scripts/eval_yolov3.py`` and ``scripts/demo_yolov3.py``: the ``--backend`` route.

Apart from :mod:`.infer` (which both backends import) so that no import circle forms.
"""
from .infer import backend_of, cli

__all__ = ['script_main']


def script_main(kind, argv):
    """``scripts/{kind}_yolov3.py``: the backend's ``eval_main`` or ``demo_main`` through
    :func:`~gluontrain.yolo3.infer.cli`, importing only that backend.

    Parameters
    ----------
    kind : {'eval', 'demo'}
    argv : list of str

    Returns
    -------
    int
        The exit status.
    """
    # pylint: disable=import-outside-toplevel
    if backend_of(argv) == 'torch':
        from ..torch.yolo3 import infer as backend
    else:
        from ..mx.yolo3 import infer as backend
    return cli(getattr(backend, kind + '_main'), argv)
