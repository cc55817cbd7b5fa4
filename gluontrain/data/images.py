"""Reading one image of a dataset, with one line naming the file when it cannot be read.

PIL says ``cannot identify image file <BytesIO ...>`` or ``image file is truncated (3 bytes
not processed)`` and OpenCV returns ``None``: neither names the dataset's file nor the fix.
The readers here raise :class:`ImageReadError` (a ``ValueError``) or, for a missing file,
:class:`ImageMissingError` (a ``FileNotFoundError``), both one line naming the image, what
refers to it and the fix.

A ``torch.utils.data.DataLoader`` worker's exception comes back to the main process as
``type(exc)(message)`` with the worker's traceback inside the message; the exceptions here
(and :class:`~gluontrain.data.checks.DatasetError`) turn such a message back into the
original one line, so that the command line still prints one ``error:`` line.
"""
import os
import re
import warnings

__all__ = ['ImageReadError', 'ImageMissingError', 'one_line', 'open_image', 'read_bgr',
           'image_problem', 'looks_truncated', 'warn_size_mismatch']

_WORKER_TRACEBACK = 'Traceback (most recent call last)'
_LAST_LINE = re.compile(r'^[A-Za-z_][\w.]*: (.*)$')


def one_line(message):
    """``message``, or, when it is a loader worker's re-raised report (``Caught X in
    DataLoader worker process N. Original Traceback ...``), the original message: the text
    after ``module.ExceptionName: `` on its last line.

    Parameters
    ----------
    message : str

    Returns
    -------
    str
    """
    text = str(message)
    if _WORKER_TRACEBACK not in text:
        return text
    lines = [line for line in text.splitlines() if line.strip()]
    match = _LAST_LINE.match(lines[-1].strip()) if lines else None
    return match.group(1) if match else text


class ImageReadError(ValueError):
    """An image file that cannot be decoded; the message names it and the fix (one line,
    also when re-raised from a loader worker process)."""

    def __init__(self, message):
        super().__init__(one_line(message))


class ImageMissingError(FileNotFoundError):
    """An image file that does not exist; one line, like :class:`ImageReadError`."""

    def __init__(self, message):
        super().__init__(one_line(message))


def _reason(path, exc):
    """Why ``path`` could not be decoded, in a few words."""
    try:
        if os.path.getsize(path) == 0:
            return 'is empty (0 bytes)'
    except OSError:
        pass
    text = str(exc).split('\n')[0]
    if 'truncated' in text.lower():
        return 'is truncated (its data ends early)'
    if type(exc).__name__ == 'UnidentifiedImageError' or 'cannot identify' in text:
        return 'is not an image file'
    return 'cannot be decoded ({}: {})'.format(type(exc).__name__, text)


def _fix(context):
    where = ' ({})'.format(context) if context else ''
    return ('{}: restore the file (re-encode or re-download it), or remove the image from its '
            'dataset'.format(where))


def open_image(path, mode='RGB', context=''):
    """The fully decoded PIL image at ``path``.

    Parameters
    ----------
    path : str
    mode : str or None
        Converted to this mode (``None``: as stored, e.g. an instance mask).
    context : str
        What refers to the image (an annotation file and image id), for the message.

    Returns
    -------
    PIL.Image.Image

    Raises
    ------
    ImageMissingError
        No file at ``path``.
    ImageReadError
        A zero-byte, truncated or non-image file.
    """
    from PIL import Image, ImageFile  # pylint: disable=import-outside-toplevel

    if not os.path.isfile(path):
        raise ImageMissingError('image {} does not exist{}'.format(path, _fix(context)))
    # importing gluoncv sets PIL's global LOAD_TRUNCATED_IMAGES (gluoncv/data/mhp.py), which
    # would pad a truncated file silently; the references read with PIL's default (refuse)
    saved, ImageFile.LOAD_TRUNCATED_IMAGES = ImageFile.LOAD_TRUNCATED_IMAGES, False
    try:
        with Image.open(path) as raw:
            return raw.convert(mode) if mode else raw.copy()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise ImageReadError('image {} {}{}'.format(path, _reason(path, exc), _fix(context))) \
            from None
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = saved


def read_bgr(path, context='', exif_orientation=True):
    """The BGR uint8 image ``[H, W, 3]`` at ``path`` as ``cv2.imread`` reads it.

    OpenCV decodes a truncated JPEG with its missing part grey, as the reference's
    ``cv2.imread`` does (libjpeg prints a warning naming no file); only a file OpenCV cannot
    decode at all is refused.

    Parameters
    ----------
    path : str
    context : str
        What the image is, for the error message.
    exif_orientation : bool
        Turn the image as its EXIF orientation says (``cv2.imread``'s default, what
        ssd.pytorch reads); ``False``: the stored pixels, as MXNet's ``mx.image.imread``
        (GluonCV's readers) decodes them.

    Raises
    ------
    ImageMissingError, ImageReadError
        As :func:`open_image`.
    """
    import cv2  # pylint: disable=import-outside-toplevel

    if not os.path.isfile(path):
        raise ImageMissingError('image {} does not exist{}'.format(path, _fix(context)))
    img = cv2.imread(path, cv2.IMREAD_COLOR if exif_orientation else
                     cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    if img is None:
        reason = 'is empty (0 bytes)' if os.path.getsize(path) == 0 else \
            'is not an image file OpenCV can decode'
        raise ImageReadError('image {} {}{}'.format(path, reason, _fix(context)))
    return img


def image_problem(path):
    """``None`` if the header of ``path`` reads as an image, else a short reason (cheap: the
    pixels are not decoded, so a truncated file passes)."""
    from PIL import Image  # pylint: disable=import-outside-toplevel

    if not os.path.isfile(path):
        return 'is missing'
    try:
        with Image.open(path) as im:
            im.size  # pylint: disable=pointless-statement
    except Exception as exc:  # pylint: disable=broad-except
        return _reason(path, exc)
    return None


def looks_truncated(path):
    """Whether the JPEG or PNG at ``path`` lacks its end marker (``FF D9`` / ``IEND``): cut
    short. Reads the first and last bytes only; other formats give ``False``.

    OpenCV and MXNet decode such a file without an error (the missing rows grey or black);
    PIL refuses it when decoding.
    """
    try:
        with open(path, 'rb') as f:
            head = f.read(8)
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64))
            tail = f.read()
    except OSError:
        return False
    if head[:2] == b'\xff\xd8':
        # a few writers pad after the marker: look for it near the end, not at the last byte
        return b'\xff\xd9' not in tail
    if head == b'\x89PNG\r\n\x1a\n':
        return b'IEND' not in tail
    return False


def warn_size_mismatch(path, actual, declared, source, consequence):
    """Warn that the image at ``path`` is ``actual`` ``(W, H)`` but ``source`` declares
    ``declared`` (the VG reader's warning, shared by every reader).

    Parameters
    ----------
    path : str
    actual, declared : (int, int)
        ``(width, height)``.
    source : str
        The file declaring the size.
    consequence : str
        What the reader does with the mismatch (e.g. "its boxes are used as written").

    Returns
    -------
    bool
        Whether they differ.
    """
    actual, declared = tuple(int(v) for v in actual), tuple(int(v) for v in declared)
    if actual == declared:
        return False
    warnings.warn('{} is {}x{} but {} says {}x{}; {}.'.format(
        path, actual[0], actual[1], source, declared[0], declared[1], consequence))
    return True
