"""File-system helpers shared by the writers: atomic installation, deterministic outputs."""
import contextlib
import json
import os
import shutil
import tempfile

from ..core.locks import file_lock

__all__ = ['staging_dir', 'install', 'write_json', 'save_jpeg', 'file_lock']

JPEG_QUALITY = 90


@contextlib.contextmanager
def staging_dir(root, name):
    """A temporary directory beside the final location, removed on the way out.

    Building the dataset there and renaming it into place means an interrupted run never
    leaves a half-written dataset under the name a reader looks for.
    """
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='.{}.tmp-'.format(name), dir=root)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def install(staging, moves, remove_first=()):
    """Rename staged entries into place, replacing older versions.

    Parameters
    ----------
    staging : str
        The staging directory; replaced entries are moved into it, and die with it.
    moves : list of (str, str)
        ``(staged_path, final_path)`` in the order to install; put the file a reader opens
        first (annotations, the h5 index) last.
    remove_first : list of str
        Final paths to take away before anything new lands, so that stale annotations never
        sit beside new images.
    """
    graveyard = os.path.join(staging, '.replaced')
    os.makedirs(graveyard, exist_ok=True)

    def _retire(path):
        if os.path.lexists(path):
            os.rename(path, os.path.join(graveyard, '{}-{}'.format(
                len(os.listdir(graveyard)), os.path.basename(path))))

    for path in remove_first:
        _retire(path)
    for src, dst in moves:
        _retire(dst)
        os.rename(src, dst)


def write_json(path, obj, **kwargs):
    """Write ``obj`` as JSON; key order is the dicts' insertion order, so output is stable."""
    with open(path, 'w') as f:
        json.dump(obj, f, **kwargs)


def save_jpeg(image, path):
    """Save a PIL image as JPEG with fixed settings (byte-identical for identical pixels).

    Full-resolution chroma (4:4:4) keeps the colour of small shapes' thin tips, which 4:2:0
    would smear into the background.
    """
    image.save(path, format='JPEG', quality=JPEG_QUALITY, subsampling=0, optimize=False)
