"""MXNet's ``mx.image.imread(path, 1)`` as a numpy array, decoded by the ``cv2`` package.

GluonCV's datasets read with ``mx.image.imread`` (MXNet's own OpenCV 3.4 into an NDArray,
which the numpy transforms then copy out); ``cv2`` decodes straight into numpy with the same
pixels for complete JPEG and PNG files, the EXIF orientation ignored as MXNet ignores it
(the files checked, and why a file cut short or another format is read by
``mx.image.imread`` itself: docs/faithfulness.md, "Fast train transform, targets and VOC
metric", "Decoding and batches")."""
import numpy as np

__all__ = ['imread_rgb', 'decodes_like_mxnet']

_JPEG, _PNG = b'\xff\xd8', b'\x89PNG\r\n\x1a\n'


def decodes_like_mxnet(data):
    """Whether ``cv2`` decodes these file bytes as MXNet does: a JPEG or PNG that has its
    end marker (``FF D9`` / ``IEND``) near its end."""
    tail = data[-64:]
    if data[:2] == _JPEG:
        return b'\xff\xd9' in tail
    if data[:8] == _PNG:
        return b'IEND' in tail
    return False


def imread_rgb(path):
    """``mx.image.imread(path, 1).asnumpy()``: the RGB uint8 image ``[H, W, 3]`` at ``path``.

    Parameters
    ----------
    path : str

    Returns
    -------
    numpy.ndarray
    """
    import cv2  # pylint: disable=import-outside-toplevel

    with open(path, 'rb') as f:
        data = f.read()
    if decodes_like_mxnet(data):
        img = cv2.imdecode(np.frombuffer(data, np.uint8),
                           cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
        if img is not None:
            return cv2.cvtColor(img, cv2.COLOR_BGR2RGB, dst=img)
    import mxnet as mx  # pylint: disable=import-outside-toplevel
    return mx.image.imread(path, 1).asnumpy()
