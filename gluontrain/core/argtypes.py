"""argparse ``type=`` functions that refuse impossible values while parsing.

argparse reports their refusals as ``error: argument --name: <message>`` (exit status 2), so
the user sees the argument's name next to what is wrong with it. Each keeps the value's
reference type: the integer lists stay the comma-separated strings the recipes parse later.
"""
import argparse
import math
import os

__all__ = ['finite_non_negative_float', 'unit_interval_float', 'positive_int', 'non_negative_int',
           'int_at_least', 'positive_size', 'positive_float', 'multiple_of', 'int_list', 'resolve_local_rank',
           'path_problem', 'check_input_file', 'output_dir_problem', 'check_output_dir']


def finite_non_negative_float(text):
    """A float that is finite and >= 0 (learning rates: ``nan``, ``inf`` and ``-0.1`` are
    refused before they reach the optimizer)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError('{!r} is not a number'.format(text)) from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            '{} is not a finite number >= 0; give e.g. 0.001'.format(text))
    return value


def unit_interval_float(text):
    """A finite float in [0, 1] (score thresholds: ``nan`` would keep nothing and say nothing,
    a value above 1 keeps nothing either)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError('{!r} is not a number'.format(text)) from None
    if not 0 <= value <= 1:  # nan fails both comparisons
        raise argparse.ArgumentTypeError('{} is not a score in [0, 1]; give e.g. 0.5'.format(
            text))
    return value


def int_at_least(minimum, why):
    """A type function for integers >= ``minimum`` whose refusal says why.

    Parameters
    ----------
    minimum : int
    why : str
        Said after the value, e.g. "would divide by zero (...)".
    """
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError('{!r} is not an integer'.format(text)) from None
        if value < minimum:
            raise argparse.ArgumentTypeError('{} {}; give an integer >= {}'.format(
                text, why, minimum))
        return value
    parse.__name__ = 'int_at_least_{}'.format(minimum)
    return parse


positive_int = int_at_least(1, 'trains nothing')
positive_int.__name__ = 'positive_int'
positive_int.__doc__ = """An integer >= 1 (epochs, iterations, batch sizes: 0 or fewer would train
nothing)."""

positive_size = int_at_least(1, 'is not a positive size')
positive_size.__name__ = 'positive_size'
positive_size.__doc__ = """An integer >= 1 where 0 would compute nothing (image sides, inference
batch sizes)."""

non_negative_int = int_at_least(0, 'is negative')
non_negative_int.__name__ = 'non_negative_int'
non_negative_int.__doc__ = """An integer >= 0 (counts and intervals where 0 means "none":
workers, log lines, saves, a starting epoch or iteration)."""


def positive_float(text):
    """A finite float > 0 (width multipliers, scales)."""
    value = finite_non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError('0 is not > 0; give e.g. 0.25')
    return value


def multiple_of(step, why, maximum=None):
    """A type function for positive integers divisible by ``step``.

    Parameters
    ----------
    step : int
    why : str
        Said in the refusal, e.g. "YOLOv3's coarsest stride".
    maximum : int, optional
        The largest value accepted (image sides: far larger ones run out of memory).
    """
    def parse(text):
        value = positive_size(text)
        if value % step:
            lower = max(step, value // step * step)
            raise argparse.ArgumentTypeError(
                '{} is not a multiple of {} ({}); use {} or {}'.format(
                    text, step, why, lower, lower + step))
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(
                '{} is above {} (one {} x {} float image is already {:.1f} GB); use a '
                'multiple of {} up to {}'.format(text, maximum, maximum, maximum,
                                                 maximum * maximum * 3 * 4 / 1e9, step, maximum))
        return value
    parse.__name__ = 'multiple_of_{}'.format(step)
    return parse


def int_list(text):
    """Comma-separated non-negative integers such as ``'160,180'``; returns ``text`` itself
    (stripped of spaces), which the recipes split later as their references do."""
    parts = [p.strip() for p in str(text).split(',')]
    bad = [p for p in parts if not p.isdigit()]
    if bad:
        raise argparse.ArgumentTypeError(
            '{!r} is not a comma-separated list of integers (e.g. 160,180): {} {}'.format(
                text, ', '.join(repr(b) for b in bad),
                'is not a non-negative integer' if len(bad) == 1
                else 'are not non-negative integers'))
    return ','.join(parts)


def resolve_local_rank(args, parser):
    """Fill ``args.local_rank`` when ``--local_rank``/``--local-rank`` was not given.

    ``torch.distributed.launch`` passes the flag; ``torchrun`` sets ``$LOCAL_RANK`` instead; a
    plain run is rank 0.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments with a ``local_rank`` attribute (None when the flag was absent).
    parser : argparse.ArgumentParser
        Reports a non-integer ``$LOCAL_RANK`` as a usage error (exit 2, no traceback).

    Returns
    -------
    argparse.Namespace
        ``args``, with ``local_rank`` an int.
    """
    if args.local_rank is None:
        env = os.environ.get('LOCAL_RANK')
        try:
            args.local_rank = int(env) if env not in (None, '') else 0
        except ValueError:
            parser.error('LOCAL_RANK={!r} is not an integer (torchrun sets it)'.format(env))
    return args


def path_problem(path, want='file'):
    """What is wrong with ``path`` as an input ``want`` ('file' or 'folder'), or None.

    "does not exist" only when nothing is there: a folder given for a file (or the reverse)
    says so, since the fix differs (name the file inside it).

    Parameters
    ----------
    path : str
    want : {'file', 'folder'}

    Returns
    -------
    str or None
        e.g. ``'does not exist'``, ``'is a folder, not a file'``.
    """
    path = os.path.expanduser(str(path))
    if want == 'file':
        if os.path.isfile(path):
            return None
        if os.path.isdir(path):
            return 'is a folder, not a file'
    else:
        if os.path.isdir(path):
            return None
        if os.path.exists(path):
            return 'is a file, not a folder'
    if os.path.exists(path):
        return 'is not a regular {}'.format(want)
    return 'does not exist'


def check_input_file(path, argument, fix):
    """Refuse an input file that is missing, or is a folder, in one line.

    Parameters
    ----------
    path : str
    argument : str
        The option that named it, e.g. ``'--resume'``.
    fix : str
        What to pass instead.

    Raises
    ------
    FileNotFoundError
        ``ARGUMENT PATH does not exist; FIX`` (or ``is a folder, not a file``).
    """
    problem = path_problem(path)
    if problem:
        raise FileNotFoundError('{} {} {}; {}'.format(argument, path, problem, fix))


def output_dir_problem(path):
    """Why ``path`` cannot be the folder a run writes into, or None: an existing file there
    (``os.makedirs`` would raise ``FileExistsError``), or a file where one of its parent
    folders should be.

    Parameters
    ----------
    path : str

    Returns
    -------
    str or None
    """
    path = os.path.abspath(os.path.expanduser(str(path)))
    if os.path.exists(path) and not os.path.isdir(path):
        return '{} is an existing file, not a folder'.format(path)
    parent = os.path.dirname(path)
    while parent and not os.path.exists(parent):
        parent, last = os.path.dirname(parent), parent
        if parent == last:
            break
    if parent and os.path.exists(parent) and not os.path.isdir(parent):
        return '{} is an existing file, so no folder can be made under it'.format(parent)
    return None


def check_output_dir(path, argument, fix='give a folder (it is created if missing)'):
    """Refuse, before anything is written, an output folder that cannot be made, in one line
    (the sibling of :func:`check_input_file`).

    Parameters
    ----------
    path : str
    argument : str
        The option or key that named it, e.g. ``'--log_dir'``, ``'OUTPUT_DIR'``.
    fix : str
        What to pass instead.

    Raises
    ------
    ValueError
        ``ARGUMENT PATH: PROBLEM; FIX`` (:func:`output_dir_problem`).
    """
    problem = output_dir_problem(path)
    if problem:
        raise ValueError('{} {}: {}; {}'.format(argument, path, problem, fix))
