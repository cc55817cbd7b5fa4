"""Writers of a run's outputs that never fail after the loop has ended: the text log's file
handler, TensorBoard event files written in the loop's thread, and the TensorBoard hook; the
small row files (metrics, best-score log) rewritten atomically, and GluonCV's best/interval
weights policy (:func:`save_best_and_interval`) over :mod:`.checkpoint`'s atomic writes.

A write that fails (a full disk) raises an ``OSError`` naming the file inside the training
loop, where the CLI turns it into one ``error:`` line; the files are closed as the loop
unwinds, and one of which nothing reached the disk is removed (never a 0-byte file).
"""
import logging
import os
import sys
import time

from .checkpoint import atomic_write
from .loop import Hook, resuming


def jsonable(value):
    """Metric values as JSON: floats (NaN as null), or the text COCO's metric returns."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    return None if value != value else value


def remove_if_empty(path):
    """Remove ``path`` when it is a regular file of 0 bytes (what a writer that failed on a
    full disk leaves behind); anything else, devices included, is left alone."""
    try:
        if os.path.isfile(path) and os.path.getsize(path) == 0:
            os.remove(path)
    except OSError:
        pass


class LogFileHandler(logging.FileHandler):
    """``logging.FileHandler`` for a run's text log: opened at the first line, and a line
    that cannot be written (a full disk) is raised as an ``OSError`` naming the file, once,
    instead of logging's ``--- Logging error ---`` traceback on stderr; the file is closed
    then (removed when nothing of it was written) and later lines go to the console only.

    Parameters
    ----------
    path : str
    mode : str
        ``'a'`` (GluonCV's logs) or ``'w'`` (seamseg's and SGB's).
    """

    def __init__(self, path, mode='a'):
        super().__init__(path, mode=mode, delay=True)
        self.failed = False

    def emit(self, record):
        if not self.failed:
            super().emit(record)

    def handleError(self, record):
        error = sys.exc_info()[1]
        if self.failed or not isinstance(error, OSError):
            return super().handleError(record)
        self.failed = True
        self.close_quietly()
        raise OSError(error.errno, error.strerror or str(error), self.baseFilename) from error

    def close_quietly(self):
        """Close the file even when its last buffered bytes cannot be written, and remove it
        when it is empty (never a 0-byte log)."""
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
        remove_if_empty(self.baseFilename)

    def close(self):
        try:
            super().close()
        except OSError:
            self.failed = True
        if self.failed:
            self.close_quietly()


class EventFile:
    """A TensorBoard event file written in the caller's thread (tensorboardX's record
    format, without ``SummaryWriter``'s writer thread and exit handler): a write that fails
    (a full disk) raises in the training loop, naming the file, and nothing is left to fail
    after the loop has ended.

    Parameters
    ----------
    logdir : str
    purge_step : int, optional
        A resumed run's first step: TensorBoard hides the events of every tag at this step
        and later from the earlier files of the folder (the interrupted run's steps past its
        checkpoint), as ``SummaryWriter(purge_step=...)`` does.
    """

    def __init__(self, logdir, purge_step=None):
        # pylint: disable=import-outside-toplevel
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event, SessionLog
        from tensorboardX.summary import scalar
        self._event, self._scalar = Event, scalar
        os.makedirs(logdir, exist_ok=True)
        # the process id in the name: a run resumed within the second the interrupted run
        # started would otherwise reopen (and empty) its file, named by the second
        self._writer = self._guard(lambda: EventsWriter(os.path.join(logdir, 'events'),
                                                        '.{}'.format(os.getpid())))
        self.path = self._writer._file_name  # pylint: disable=protected-access
        if purge_step is not None:
            self._write(Event(step=purge_step, file_version='brain.Event:2'))
            self._write(Event(step=purge_step,
                              session_log=SessionLog(status=SessionLog.START)))

    def _guard(self, fn):
        try:
            return fn()
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e),
                          getattr(self, 'path', None) or e.filename) from e

    def _write(self, event):
        event.wall_time = time.time()
        self._guard(lambda: self._writer.write_event(event))

    def add_scalar(self, tag, value, step):
        """One scalar point ``(step, value)`` of the curve ``tag``."""
        self._write(self._event(summary=self._scalar(tag, float(value)), step=int(step)))

    def flush(self):
        """Write the buffered events to disk."""
        self._guard(self._writer.flush)

    def close(self):
        """Flush and close; a file that cannot be completed is closed all the same, and
        removed when nothing of it reached the disk (never a 0-byte file)."""
        try:
            self._guard(self._writer.close)
        except OSError:
            try:
                self._writer._py_recordio_writer._writer.close()  # pylint: disable=W0212
            except (OSError, AttributeError):
                pass
            remove_if_empty(self.path)
            raise


class MissingDependency(ValueError, ImportError):
    """An optional package an argument needs is not installed: an ``ImportError`` for code
    that expects one, a ``ValueError`` for the command lines, which say it in one line."""


def tensorboard_available():
    """True when ``tensorboardX`` (which writes the TensorBoard event files) imports."""
    try:
        import tensorboardX  # noqa: F401  pylint: disable=import-outside-toplevel,W0611
    except ImportError:
        return False
    return True


class TensorBoardHook(Hook):
    """TensorBoard scalars: running losses and lr every ``log_interval`` steps (x = iteration),
    epoch means and validation metrics every epoch (x = epoch).

    Uses ``tensorboardX``'s file format (optional dependency, ``pip install tensorboardX``),
    imported when training starts so that the core stays importable without it. The events
    are written in the loop's thread (:class:`EventFile`) and flushed every epoch; the file
    is closed in ``after_train``, also when the run stops on an error. A resumed run marks
    its first step so that TensorBoard hides the interrupted run's points past the
    checkpoint.
    """
    main_process_only = True  # writes event files

    def __init__(self, logdir, meter, log_interval=100):
        self.logdir, self.meter, self.log_interval = logdir, meter, log_interval
        self.writer = None

    def before_train(self, state):
        if not tensorboard_available():
            raise MissingDependency('TensorBoard logging needs tensorboardX: pip install '
                                    'tensorboardX')
        self.writer = EventFile(self.logdir, state.iteration + 1 if resuming(state) else None)

    def after_batch(self, state):
        if self.log_interval and not state.iteration % self.log_interval:
            for name, value in self.meter.running().items():
                self.writer.add_scalar('train/' + name, value, state.iteration)
            self.writer.add_scalar('train/lr', state.outputs.get('lr', 0.0), state.iteration)

    def after_epoch(self, state):
        for name, value in self.meter.epoch().items():
            self.writer.add_scalar('epoch/' + name, value, state.epoch)
        for name, value in zip(*state.scores.get('val', ((), ()))):
            value = jsonable(value)
            if isinstance(value, float):
                self.writer.add_scalar('val/' + name, value, state.epoch)
        self.writer.flush()

    def after_train(self, state):
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.close()


def read_text(path):
    """The text of ``path`` ('' when it does not exist), ending in a newline unless empty:
    a last line a killed writer left unfinished is completed, so that the next line appended
    starts on its own line."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return ''
    return text if not text or text.endswith('\n') else text + '\n'


def append_lines(path, lines):
    """Append ``lines`` (str, each without its newline) to the text file ``path`` atomically:
    the whole file is rewritten through a staged copy, so a full disk or a kill leaves the
    old file complete (never a 0-byte file or half a line).

    For small logs (one line per epoch or per new best score); the cost is the file's size.

    Parameters
    ----------
    path : str
    lines : list of str
    """
    text = read_text(path) + ''.join(line + '\n' for line in lines)
    atomic_write(path, lambda f: f.write(text), mode='w')


def filter_lines(path, keep):
    """Rewrite the text file ``path`` atomically with the lines ``keep(line)`` accepts (a
    missing file is left alone, an unchanged file is not rewritten).

    Returns
    -------
    int
        The number of lines dropped.
    """
    lines = read_text(path).splitlines()
    kept = [line for line in lines if keep(line)]
    if len(kept) != len(lines):
        atomic_write(path, lambda f: f.write(''.join(k + '\n' for k in kept)), mode='w')
    return len(lines) - len(kept)


def save_best_and_interval(write_weights, best_map, current_map, epoch, save_interval, prefix,
                           ext):
    """GluonCV's ``save_params`` policy, for any backend.

    ``{prefix}_best{ext}`` is written when ``current_map`` beats ``best_map[0]`` (a one-element
    list updated in place, starting at 0, so a score of 0 never saves a best) and a line
    ``'{epoch:04d}:\\t{map:.4f}'`` is appended to ``{prefix}_best_map.log``;
    ``{prefix}_{epoch:04d}_{map:.4f}{ext}`` is written every ``save_interval`` (0 included).

    Parameters
    ----------
    write_weights : callable
        ``write_weights(path)`` writes the weights to ``path`` atomically.
    ext : str
        ``'.params'`` (MXNet) or ``'.pth'`` (PyTorch).
    """
    current_map = float(current_map)
    if current_map > best_map[0]:
        best_map[0] = current_map
        write_weights('{}_best{}'.format(prefix, ext))
        append_lines(prefix + '_best_map.log', ['{:04d}:\t{:.4f}'.format(epoch, current_map)])
    if save_interval and epoch % save_interval == 0:
        write_weights('{}_{:04d}_{:.4f}{}'.format(prefix, epoch, current_map, ext))
