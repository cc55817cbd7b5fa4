"""argparse ``type=`` functions that refuse impossible values while parsing.

argparse reports their refusals as ``error: argument --name: <message>`` (exit status 2), so
the user sees the argument's name next to what is wrong with it. Each keeps the value's
reference type: the integer lists stay the comma-separated strings the recipes parse later.
"""
import argparse
import math
import os

__all__ = ['finite_non_negative_float', 'positive_int', 'multiple_of', 'int_list',
           'resolve_local_rank']


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


def positive_int(text):
    """An integer >= 1 (epochs, iterations, batch sizes: 0 or fewer would train nothing)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError('{!r} is not an integer'.format(text)) from None
    if value < 1:
        raise argparse.ArgumentTypeError('{} trains nothing; give an integer >= 1'.format(text))
    return value


def multiple_of(step, why):
    """A type function for positive integers divisible by ``step``.

    Parameters
    ----------
    step : int
    why : str
        Said in the refusal, e.g. "YOLOv3's coarsest stride".
    """
    def parse(text):
        value = positive_int(text)
        if value % step:
            lower = max(step, value // step * step)
            raise argparse.ArgumentTypeError(
                '{} is not a multiple of {} ({}); use {} or {}'.format(
                    text, step, why, lower, lower + step))
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
