"""``scripts/eval_yolov3.py`` and ``scripts/demo_yolov3.py``: the ``--backend`` route.

Above both backends (it imports the one a command asks for), apart from
:mod:`gluontrain.yolo3.infer`, which both backends import.
"""
import sys

from .registry import mxnet_python_refusal
from .yolo3.infer import backend_of, cli

__all__ = ['script_main', 'INTERRUPTED']

#: what each script says on Ctrl-C (exit status 130)
INTERRUPTED = {
    'eval': 'interrupted during the evaluation; no score was computed',
    'demo': 'interrupted; pictures written so far are in --out, detections.json was not '
            'written: run again for it',
    'export': 'interrupted; no ONNX file was written',
}


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
    if backend_of(argv) != 'torch' and mxnet_python_refusal():
        print('error: ' + mxnet_python_refusal(), file=sys.stderr)  # Python >= 3.12
        return 1
    try:
        if backend_of(argv) == 'torch':
            from .torch.yolo3 import infer as backend
        else:
            from .mx.yolo3 import infer as backend
    except KeyboardInterrupt:
        # importing a framework takes seconds: a Ctrl-C there is still one line
        print(INTERRUPTED[kind], file=sys.stderr)
        return 130
    return cli(getattr(backend, kind + '_main'), argv, INTERRUPTED[kind])
