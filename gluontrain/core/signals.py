"""Ctrl-C held over writes that must not be cut: a ``KeyboardInterrupt`` raised inside a C++
writer's Python callback aborts the process instead of unwinding it."""
import contextlib
import signal
import threading

__all__ = ['sigint_held']


@contextlib.contextmanager
def sigint_held():
    """Hold a Ctrl-C (SIGINT) that arrives inside the block and raise its
    ``KeyboardInterrupt`` when the block has finished.

    A ``KeyboardInterrupt`` raised inside a C++ writer's Python callback (``torch.save``
    streaming into a checkpoint) unwinds through C++ and aborts the process (exit 134, about
    one Ctrl-C in five during the write); held, the write completes, the file is renamed into
    place, and the interrupt ends the run as any other (exit 130). Only in the main thread
    and while Python's own handler is installed; elsewhere the block runs unchanged.
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt
