"""``gluontrain train <recipe> [args]`` / ``python -m gluontrain train <recipe> [args]``.

What a user can cause ends in one ``error: ...`` line (exit status 1) or, for Ctrl-C, one
``interrupted at ...`` line (exit status 130), never a traceback: bad arguments and data
(``ValueError``, ``FileNotFoundError``), outputs that cannot be written (``OSError`` of a
read-only file system, a full disk, missing permissions), a diverged run
(``FloatingPointError`` from the NaN guard). Anything else is a bug and keeps its traceback.

A recipe module may define ``OUTPUT_ARGUMENT`` (e.g. ``'--save-prefix'``), the argument the
messages about unwritable outputs point to.
"""
import errno
import sys

from .core.loop import TrainState
from .registry import get_recipe, list_recipes

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C'd program

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_NO_PERMISSION = (errno.EACCES, errno.EPERM)


def _named_filename(error):
    """The file of ``error`` or, when it names none (``f.write`` on a full disk), of the
    earliest error of the same kind it was raised while handling: a hook that fails to write
    as the loop unwinds must not hide the file that failed first."""
    name, seen = None, set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.filename is not None:
            name = error.filename
        error = error.__context__
    return name


def oserror_message(error, output_argument=None):
    """The one-line message for an ``OSError`` a user can fix, or ``None`` for other errors.

    Parameters
    ----------
    error : OSError
    output_argument : str, optional
        The recipe's output argument, named in the fix.
    """
    elsewhere = 'write the outputs elsewhere{}'.format(
        ' with ' + output_argument if output_argument else '')
    if error.errno == errno.EROFS:
        fix = 'the file system is read-only: ' + elsewhere
    elif error.errno in _NO_SPACE:
        fix = 'free space on that disk or ' + elsewhere
    elif error.errno in _NO_PERMISSION:
        # reading a dataset can fail this way too, so no "cannot write"
        return '{}: {}; check its permissions, or {}'.format(
            _named_filename(error) or 'a file', error.strerror, elsewhere)
    else:
        return None
    where = _named_filename(error) or 'a file'
    return 'cannot write {}: {}; {}'.format(where, error.strerror, fix)


def interrupted_state(error):
    """The loop's :class:`TrainState` at a Ctrl-C (``run_loop`` attaches it to the exception
    as ``error.train_state``), or ``None`` when training had not started."""
    state = getattr(error, 'train_state', None)
    return state if isinstance(state, TrainState) else None


def interrupt_message(state):
    """``interrupted at epoch E, batch B; last checkpoint: PATH; resume with --resume PATH``.

    The checkpoint part names ``state.last_checkpoint`` (or ``state.scores['last_checkpoint']``),
    the file the checkpoint hook last wrote; without one, it says there is none yet.
    """
    if state is None:
        return 'interrupted before training started'
    line = 'interrupted at epoch {}, batch {}'.format(state.epoch, state.batch)
    path = getattr(state, 'last_checkpoint', None) or state.scores.get('last_checkpoint')
    if path:
        return '{}; last checkpoint: {}; resume with --resume {}'.format(line, path, path)
    return line + '; no checkpoint written yet'


def main(argv=None):
    """Run ``train <recipe> ...``; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != 'train' or argv[1] not in list_recipes():
        print('usage: gluontrain train {{{}}} [recipe arguments]\n'
              '       gluontrain train yolo3 --help'.format(','.join(list_recipes())),
              file=sys.stderr)
        return 2
    recipe = get_recipe(argv[1])
    try:
        state = recipe.main(argv[2:])
    except KeyboardInterrupt as e:
        print(interrupt_message(interrupted_state(e)), file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, FileNotFoundError) as e:
        print('error: {}'.format(e), file=sys.stderr)
        return EXIT_ERROR
    except FloatingPointError as e:
        # the NaN guard's reason says where; the usual cause is a learning rate too high
        print('error: {}; the training diverged: lower --lr (or check the data), and resume '
              'from the last good checkpoint if there is one'.format(e), file=sys.stderr)
        return EXIT_ERROR
    except OSError as e:
        message = oserror_message(e, getattr(recipe, 'OUTPUT_ARGUMENT', None))
        if message is None:
            raise
        print('error: ' + message, file=sys.stderr)
        return EXIT_ERROR
    # in a distributed run every rank has the score; rank 0 speaks for the job
    if 'val' in state.scores and getattr(state, 'is_main', True):
        names, values = state.scores['val']
        print('final validation {}: {}'.format(names[-1], values[-1]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
