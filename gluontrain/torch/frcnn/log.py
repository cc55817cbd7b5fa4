"""seamseg's logging (seamseg/utils/logging.py): console + ``{log_dir}/{name}.log`` and the
iteration line.

Line: ``[{epoch}/{num_epochs}] [{step}/{num_steps}]`` with each number right-aligned to the
width of its total, then per value a tab and ``name=value (mean)`` for meters (``.3f``) or
``name=value`` for numbers. File records: ``I yy-mm-dd HH:MM:SS message`` (INFO and up);
console: ``HH:MM:SS message`` (DEBUG and up). TensorBoard gets ``{phase}/{name}`` = the
meter's *last* value (not its mean) at ``global_step``. ``multiple_lines=True`` puts each
value on its own line (seamseg's drops them: docs/faithfulness.md, "Two-stage detector",
"Deliberate differences")."""
import logging
import os
from math import log10

from ...core.writers import LogFileHandler
from .meters import AverageMeter

__all__ = ['LOGGER_NAME', 'init', 'get_logger', 'format_iteration', 'iteration']

LOGGER_NAME = 'gluontrain.frcnn'
CONSOLE_FORMAT = ('%(asctime)s %(message)s', '%H:%M:%S')
FILE_FORMAT = ('%(levelname).1s %(asctime)s %(message)s', '%y-%m-%d %H:%M:%S')


def _current_total(current, total):
    width = int(log10(total)) + 1
    return ('[{:' + str(width) + '}/{:' + str(width) + '}]').format(current, total)


def init(log_dir, name):
    """Attach seamseg's console and file handlers (``log_dir/name.log``, mode ``w``).

    Handlers from an earlier :func:`init` are closed and replaced, so that calling it twice
    in one process (tests, notebooks) does not double every line.

    Parameters
    ----------
    log_dir : str
    name : str
        ``training`` or ``eval``.

    Returns
    -------
    logging.Logger
    """
    logger = get_logger()
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    for h in [h for h in logger.handlers if getattr(h, '_frcnn_init', False)]:
        logger.removeHandler(h)
        h.close()
    console = logging.StreamHandler()
    console.setFormatter(logging.Formatter(fmt=CONSOLE_FORMAT[0], datefmt=CONSOLE_FORMAT[1]))
    console.setLevel(logging.DEBUG)
    os.makedirs(log_dir, exist_ok=True)
    # a full disk is one error naming the file, not logging's traceback (core.writers)
    file_handler = LogFileHandler(os.path.join(log_dir, name + '.log'), mode='w')
    file_handler.setFormatter(logging.Formatter(fmt=FILE_FORMAT[0], datefmt=FILE_FORMAT[1]))
    file_handler.setLevel(logging.INFO)
    for h in (console, file_handler):
        h._frcnn_init = True  # pylint: disable=protected-access
        logger.addHandler(h)
    return logger


def get_logger():
    """The recipe's logger."""
    return logging.getLogger(LOGGER_NAME)


def format_iteration(epoch, num_epochs, step, num_steps, values, multiple_lines=False):
    """The message of one seamseg log line.

    Parameters
    ----------
    epoch, num_epochs, step, num_steps : int
        1-based epoch and step with their totals.
    values : dict
        Name -> :class:`AverageMeter` (``value (mean)``) or number.
    multiple_lines : bool

    Returns
    -------
    str
    """
    msg = _current_total(epoch, num_epochs) + ' ' + _current_total(step, num_steps)
    sep = '\n' if multiple_lines else ''
    for k, v in values.items():
        if isinstance(v, AverageMeter):
            msg += sep + '\t{}={:.3f} ({:.3f})'.format(k, v.value.item(), v.mean.item())
        else:
            msg += sep + '\t{}={:.3f}'.format(k, v)
    return msg


def iteration(summary, phase, global_step, epoch, num_epochs, step, num_steps, values,
              multiple_lines=False):
    """Log one line and write the values to ``summary`` (a TensorBoard writer or None).

    Parameters
    ----------
    summary : object or None
        Has ``add_scalar(tag, value, step)``.
    phase : str
        ``train`` or ``val``.
    global_step, epoch, num_epochs, step, num_steps : int
    values : dict
    multiple_lines : bool
    """
    if summary is not None:
        for k, v in values.items():
            scalar = v.value.item() if isinstance(v, AverageMeter) else v
            summary.add_scalar('{}/{}'.format(phase, k), scalar, global_step)
    get_logger().info(format_iteration(epoch, num_epochs, step, num_steps, values,
                                       multiple_lines))
