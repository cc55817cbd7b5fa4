"""GluonCV's model store without MXNet: its file names, SHA-1s and address scheme, and the
released files fetched as ``gluoncv.model_zoo.model_store.get_model_file`` fetches them,
with a progress bar, resumed downloads, a rename once whole and right, and one ``ValueError``
line per failure (docs/from_gluoncv.md, "Weights fetched as GluonCV fetches them"; stdlib
``urllib`` only, no framework)."""
import hashlib
import http.client
import os
import socket
import urllib.error
import urllib.request
import zipfile

from .checkpoint import atomic_save_file
from .locks import file_lock

__all__ = ['SHA1', 'APACHE_REPO_URL', 'store_root', 'file_name', 'params_path', 'url_of',
           'sha1_of', 'fetch', 'find_or_fetch']

#: gluoncv 0.10.5's ``model_store._model_sha1`` for the YOLOv3 zoo and its ImageNet bases
SHA1 = {
    'darknet53': '2189ea49720a116dead245b9b252301cffa18d28',
    'mobilenet1.0': 'efbb2ca3881998d5a8c5cb6c457a28c1e085fed5',
    'mobilenet0.25': 'f0046a3da4e150b85da58ea31913dbb86e7540d1',
    'yolo3_darknet53_voc': 'f5ece5ce1422eeca3ce2908004e469ffdf91fd41',
    'yolo3_darknet53_coco': '09767802230b45af1c27697a2dad6d1ebaacc1e2',
    'yolo3_mobilenet1.0_voc': '3b47835ac3dd80f29576633949aa58aee3094353',
    'yolo3_mobilenet1.0_coco': '66dbbae67be8f1e3cd3c995ce626a2bdc89769c6',
}
#: gluoncv's default repository (``model_store.apache_repo_url``)
APACHE_REPO_URL = 'https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/'
_CHUNK = 1 << 20


def store_root():
    """``$MXNET_HOME/models`` if ``MXNET_HOME`` is set, else ``~/.mxnet/models`` (gluoncv's)."""
    if 'MXNET_HOME' in os.environ:
        return os.path.join(os.environ['MXNET_HOME'], 'models')
    return os.path.expanduser(os.path.join('~', '.mxnet', 'models'))


def _sha1(name, sha1=None):
    sha1 = sha1 or SHA1.get(name)
    if not sha1:
        raise ValueError('{!r} is no model of GluonCV\'s store here; known: {}'.format(
            name, ', '.join(sorted(SHA1))))
    return sha1


def file_name(name, sha1=None):
    """``{name}-{first 8 hex digits of its SHA-1}``, gluoncv's ``short_hash`` naming."""
    return '{}-{}'.format(name, _sha1(name, sha1)[:8])


def params_path(name, root=None, sha1=None):
    """Where the store keeps ``name`` (it may not be there)."""
    return os.path.join(root or store_root(), file_name(name, sha1) + '.params')


def url_of(name, repo=None, sha1=None):
    """``{repo}gluon/models/{file_name}.zip``; ``repo`` defaults to ``$MXNET_GLUON_REPO``, then
    Apache's bucket, as in gluoncv."""
    repo = repo or os.environ.get('MXNET_GLUON_REPO', APACHE_REPO_URL)
    repo = repo if repo.endswith('/') else repo + '/'
    return '{}gluon/models/{}.zip'.format(repo, file_name(name, sha1))


def sha1_of(path):
    """Hex SHA-1 of the file at ``path``."""
    digest = hashlib.sha1()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(_CHUNK), b''):
            digest.update(block)
    return digest.hexdigest()


def _download(url, part, timeout, progress):
    """Append ``url``'s bytes to ``part`` from where it ends (a cut download resumes)."""
    done = os.path.getsize(part) if os.path.exists(part) else 0
    request = urllib.request.Request(url, headers={'Range': 'bytes={}-'.format(done)} if done
                                     else {})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 (http/https)
    except urllib.error.HTTPError as e:
        if e.code == 416 and done:  # the part is whole already
            return
        raise
    with response:
        if done and response.status != 206:
            done = 0  # the server ignored the range: start over
        total = response.headers.get('Content-Length')
        total = done + int(total) if total is not None else None
        bar = None
        if progress:
            from tqdm import tqdm  # pylint: disable=import-outside-toplevel
            bar = tqdm(total=total, initial=done, unit='B', unit_scale=True,
                       desc=os.path.basename(url), leave=False)
        try:
            with open(part, 'ab' if done else 'wb') as f:
                for block in iter(lambda: response.read(_CHUNK), b''):
                    f.write(block)
                    if bar is not None:
                        bar.update(len(block))
        finally:
            if bar is not None:
                bar.close()
        if total is not None and os.path.getsize(part) < total:
            raise ConnectionError('the connection closed after {} of {} bytes'.format(
                os.path.getsize(part), total))


def fetch(name, root=None, repo=None, sha1=None, timeout=60, progress=True):
    """The path of ``name``'s released file, downloaded first when it is missing or its SHA-1
    is wrong (gluoncv's ``get_model_file``).

    Parameters
    ----------
    name : str
        A model of :data:`SHA1` (``'darknet53'``, ``'yolo3_darknet53_coco'``...).
    root : str, optional
        The store folder; default :func:`store_root`.
    repo : str, optional
        The repository address; default ``$MXNET_GLUON_REPO``, then Apache's bucket.
    sha1 : str, optional
        The expected SHA-1 (default the store's, :data:`SHA1`).
    timeout : float
        Seconds without data before a download counts as failed.
    progress : bool
        Show a tqdm bar.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        One line: the address, what went wrong, the expected SHA-1 and the path to put the
        file at by hand. The ``.part`` of a cut download is kept; the next call resumes it.
    """
    sha1 = _sha1(name, sha1)
    root = root or store_root()
    os.makedirs(root, exist_ok=True)
    path = params_path(name, root, sha1)
    url = url_of(name, repo, sha1)
    by_hand = 'put the file (SHA-1 {}) at {}'.format(sha1, path)
    with file_lock(path + '.lock'):
        if os.path.isfile(path) and sha1_of(path) == sha1:
            return path
        part = os.path.join(root, file_name(name, sha1) + '.zip.part')
        try:
            _download(url, part, timeout, progress)
        except urllib.error.HTTPError as e:
            raise ValueError('cannot download {}: HTTP {} {}; {}'.format(
                url, e.code, e.reason, by_hand)) from None
        except (urllib.error.URLError, http.client.HTTPException, socket.timeout,
                OSError) as e:
            reason = getattr(e, 'reason', None) or e
            raise ValueError('cannot download {} ({}; run again to resume, offline: {})'.format(
                url, reason, by_hand)) from None
        member = file_name(name, sha1) + '.params'
        try:
            with zipfile.ZipFile(part) as archive:
                data = archive.read(member)
        except (zipfile.BadZipFile, KeyError) as e:
            os.remove(part)
            raise ValueError('{} is not the store\'s archive ({}); it was removed: run again, '
                             'or {}'.format(url, e, by_hand)) from None
        got = hashlib.sha1(data).hexdigest()
        if got != sha1:
            os.remove(part)
            raise ValueError('{} gave a file whose SHA-1 is {}, not the store\'s {}; it was not '
                             'kept: run again, or {}'.format(url, got, sha1, path)) from None
        atomic_save_file(path, lambda tmp: _write(tmp, data))
        os.remove(part)
    return path


def _write(path, data):
    with open(path, 'wb') as f:
        f.write(data)


def find_or_fetch(name):
    """The store's file of ``name`` as it is when one is there (whatever its SHA-1: a file a
    user put there by hand is theirs), else :func:`fetch` it."""
    path = params_path(name)
    return path if os.path.isfile(path) else fetch(name)
