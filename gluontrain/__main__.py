"""``gluontrain train <recipe> [args]`` / ``python -m gluontrain train <recipe> [args]``.

What a user can cause ends in one ``error: ...`` line (exit status 1) or, for Ctrl-C, one
``interrupted at ...`` line (exit status 130), never a traceback (docs/recipes.md,
"Checkpoints": bad arguments and data, unwritable outputs, a diverged run); so do an image
file PIL cannot identify, a ``MemoryError``, a recipe's ``sys.exit('message')`` and a Ctrl-C
that a library (MXNet) turned into an error of its own. Anything else is a bug and keeps its
traceback.

A recipe module may define ``OUTPUT_ARGUMENT`` (e.g. ``'--save-prefix'``), the argument the
messages about unwritable outputs point to, and ``RESUME_ADVICE`` (``'... {path} ...'``), how
the Ctrl-C line says to resume when the recipe has no ``--resume``."""
import contextlib
import sys

from .core.errors import oserror_message, raised_by_ctrl_c
from .core.loop import TrainState
from .registry import RecipeUnavailable, get_recipe, list_recipes, recipe_summary, route

EXIT_ERROR = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a Ctrl-C'd program


def interrupt_message(state, advice=None):
    """``interrupted at epoch E, batch B; last checkpoint: PATH; resume with --resume PATH``.

    The checkpoint part names ``state.last_checkpoint`` (or ``state.scores['last_checkpoint']``),
    the file the checkpoint hook last wrote; without one, it says there is none yet.

    Parameters
    ----------
    state : TrainState or None
    advice : str, optional
        How the recipe resumes, with ``{path}`` for the checkpoint (a recipe module's
        ``RESUME_ADVICE``: the scene-graph tools have no ``--resume`` and resume when the
        same command runs again); default ``resume with --resume PATH``.
    """
    if state is None:
        return 'interrupted before training started'
    line = 'interrupted at epoch {}, batch {}'.format(state.epoch, state.batch)
    path = getattr(state, 'last_checkpoint', None) or state.scores.get('last_checkpoint')
    if path:
        advice = advice or 'resume with --resume {path}'
        return '{}; last checkpoint: {}; {}'.format(line, path, advice.format(path=path))
    return line + '; no checkpoint written yet'


def _run(recipe, argv):
    """``recipe.main(argv)``; an error that a Ctrl-C turned into another type is re-raised as
    the ``KeyboardInterrupt`` it was (with the loop's state, when it has one)."""
    try:
        return recipe.main(argv)
    except Exception as e:  # pylint: disable=broad-except
        if not raised_by_ctrl_c(e):
            raise
        interrupt = KeyboardInterrupt()
        interrupt.train_state = getattr(e, 'train_state', None)
        raise interrupt from e


@contextlib.contextmanager
def _program_name(name):
    """``sys.argv[0]`` set to ``name`` inside the block (restored after), so that a recipe's
    argparse usage and ``--help`` name the command that was typed (``gluontrain train ssd``)
    rather than the console script; ``None`` leaves it alone (the ``scripts/`` files call
    :func:`main` with their own name in ``sys.argv[0]``)."""
    if name is None or not sys.argv:
        yield
        return
    saved = sys.argv[0]
    sys.argv[0] = name
    try:
        yield
    finally:
        sys.argv[0] = saved


def _usage():
    width = max(len(n) for n in list_recipes())
    lines = ['usage: gluontrain train RECIPE [recipe arguments]',
             '       gluontrain train RECIPE --help    (that recipe\'s arguments)', '', 'recipes:']
    return '\n'.join(lines + ['  {:<{}}  {}'.format(n, width, recipe_summary(n))
                              for n in list_recipes()])


def main(argv=None):
    """Run ``train <recipe> ...``; returns the process exit status.

    Parameters
    ----------
    argv : list of str, optional
        ``['train', RECIPE, ...]``; default ``sys.argv[1:]``, and then the recipe's usage
        and ``--help`` name the program ``gluontrain train RECIPE``.
    """
    from_command_line = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (['-h'], ['--help']):
        print(_usage())
        return 0
    if len(argv) < 2 or argv[0] != 'train' or argv[1] not in list_recipes():
        print(_usage(), file=sys.stderr)
        if len(argv) >= 2 and argv[0] == 'train':
            print('error: unknown recipe {!r}'.format(argv[1]), file=sys.stderr)
        return 2
    try:
        recipe = get_recipe(route(argv[1], argv[2:]))
    except RecipeUnavailable as e:
        print('error: {}'.format(e), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        # importing a backend takes seconds: a Ctrl-C there is still one line
        print(interrupt_message(None), file=sys.stderr)
        return EXIT_INTERRUPTED
    try:
        with _program_name('gluontrain train ' + argv[1] if from_command_line else None):
            state = _run(recipe, argv[2:])
    except KeyboardInterrupt as e:
        # run_loop attaches its state to the exception (none: training had not started)
        state = getattr(e, 'train_state', None)
        state = state if isinstance(state, TrainState) else None
        if state is not None and not getattr(state, 'is_main', True):
            return EXIT_INTERRUPTED  # rank 0 says where the job stopped and how to resume
        print(interrupt_message(state, getattr(recipe, 'RESUME_ADVICE', None)), file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, FileNotFoundError) as e:
        print('error: {}'.format(e), file=sys.stderr)
        return EXIT_ERROR
    except FloatingPointError as e:
        # the NaN guard's reason says where; the usual cause is a learning rate too high
        print('error: {}; the training diverged: lower --lr (or check the data), and resume '
              'from the last good checkpoint if there is one'.format(e), file=sys.stderr)
        return EXIT_ERROR
    except SystemExit as e:
        if not isinstance(e.code, str):  # argparse's own exit: its message is printed already
            raise
        # sys.exit('message') would print the message without the error: prefix
        print('error: ' + e.code, file=sys.stderr)
        return EXIT_ERROR
    except MemoryError as e:
        # a size or batch far too large for this machine (a typo: 100000 for 1000)
        print('error: out of memory{}: lower the image sizes or the batch size given'.format(
            ' ({})'.format(e) if str(e) else ''), file=sys.stderr)
        return EXIT_ERROR
    except OSError as e:
        message = oserror_message(e, getattr(recipe, 'OUTPUT_ARGUMENT', None))
        if message is None:
            raise
        print('error: ' + message, file=sys.stderr)
        return EXIT_ERROR
    except RuntimeError as e:
        # a collective that timed out because another rank stopped (torch's RuntimeError):
        # one line naming the rank; other RuntimeErrors are bugs and keep their traceback
        watchdog = sys.modules.get('gluontrain.torch.dist_watchdog')
        if watchdog is None or not watchdog.report_collective_error(e):
            raise
        return EXIT_ERROR
    # in a distributed run every rank has the score; rank 0 speaks for the job
    if 'val' in state.scores and getattr(state, 'is_main', True):
        names, values = state.scores['val']
        print('final validation {}: {}'.format(str(names[-1]).strip(), values[-1]))
    return 0


if __name__ == '__main__':
    sys.exit(main())
