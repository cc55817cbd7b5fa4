"""What a command line says for an error a user can fix: one line, never a traceback.

Shared by ``gluontrain train`` (:mod:`gluontrain.__main__`) and the YOLOv3 inference scripts
(:func:`gluontrain.yolo3.infer.cli`): an ``OSError`` of an output that cannot be written (a
read-only file system, a full disk, missing permissions, a file where a folder should be) or
of an input that is a folder, said with the file it concerns and the fix.
"""
import errno

__all__ = ['oserror_message', 'raised_by_ctrl_c']

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_NO_PERMISSION = (errno.EACCES, errno.EPERM)


def _chain(error):
    """``error`` and the errors it was raised while handling, the earliest last."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__context__


def _named_filename(error):
    """The file of ``error`` or, when it names none (``f.write`` on a full disk), of the
    earliest error of the same kind it was raised while handling: a hook that fails to write
    as the loop unwinds must not hide the file that failed first."""
    names = [e.filename for e in _chain(error) if isinstance(e, OSError)
             and e.filename is not None]
    return names[-1] if names else None


def oserror_message(error, output_argument=None):
    """The one-line message for an ``OSError`` a user can fix, or ``None`` for other errors.

    Parameters
    ----------
    error : OSError
    output_argument : str, optional
        The recipe's output argument, named in the fix.
    """
    if type(error).__name__ == 'UnidentifiedImageError':  # PIL's; it names the file
        return '{}: the file is empty or not an image; replace it, or remove it from the ' \
            'annotations'.format(error)
    elsewhere = 'write the outputs elsewhere{}'.format(
        ' with ' + output_argument if output_argument else '')
    where = _named_filename(error)
    if error.errno in (errno.EROFS,) + _NO_SPACE:
        fix = ('the file system is read-only: ' if error.errno == errno.EROFS else
               'free space on that disk or ')
        return 'cannot write {}: {}; {}{}'.format(where or 'a file', error.strerror, fix,
                                                  elsewhere)
    if error.errno in _NO_PERMISSION:
        # reading a dataset can fail this way too, so no "cannot write"
        return '{}: {}; check its permissions, or {}'.format(
            where or 'a file', error.strerror, elsewhere)
    if error.errno == errno.EEXIST:
        # only creating raises it: a file where an output folder should go
        return 'cannot create the folder {}: a file of that name exists; remove it, or {}'.format(
            where or 'a folder', elsewhere)
    if error.errno in (errno.ENOTDIR, errno.EISDIR):
        # inputs fail this way too (a folder given as a file, a file inside a file)
        what = ('a part of this path is a file, not a folder' if error.errno == errno.ENOTDIR
                else 'it is a folder, not a file')
        return '{}: {}; check the path, or {}'.format(where or 'a path', what, elsewhere)
    return None


def raised_by_ctrl_c(error):
    """Whether ``error`` was raised while handling a ``KeyboardInterrupt``: MXNet's NDArray
    assignment catches everything, so a Ctrl-C that lands inside it becomes a ``TypeError``."""
    return any(isinstance(e, KeyboardInterrupt) for e in _chain(error.__context__))
