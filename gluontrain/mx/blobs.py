"""Bytes from and to MXNet writers that only take a file name, without the system temp dir;
and the checkpoint's weights and trainer states streamed into its file (:func:`params_blob`,
:func:`trainer_states_blob`), and ``net.export``'s weights likewise (:func:`export_streamed`).

``net.save_parameters``, ``trainer.save_states`` and their ``load_*`` counterparts read and
write named files. A checkpoint wants their bytes, so they write to an anonymous in-memory
file (``memfd_create``, reached by its ``/proc/self/fd`` name): nothing lands on disk and a
killed process leaves nothing behind. Where there is no ``memfd_create`` (macOS), they use a
scratch file beside the output, named as :mod:`gluontrain.core.checkpoint` stages files, so
the next save of that output removes what a killed run left.
"""
import contextlib
import ctypes
import importlib
import os
import pickle
import warnings

import mxnet as mx
import numpy as np
from mxnet.base import _LIB, check_call

from ..core import mxparams
from ..core.checkpoint import loads_state, scratch_file
from ..core.streamed_pickle import StreamedBlob

__all__ = ['to_bytes', 'from_bytes', 'params_blob', 'trainer_states_blob', 'export_streamed',
           'check_trainer_states']


def _memfd_available():
    return hasattr(os, 'memfd_create') and os.path.isdir('/proc/self/fd')


@contextlib.contextmanager
def _named_scratch(beside):
    """Yield a file name a C library can open (and Python too, at offset 0 each time)."""
    if _memfd_available():
        fd = os.memfd_create('gluontrain-blob')
        try:
            yield '/proc/self/fd/{}'.format(fd)
        finally:
            os.close(fd)
    else:
        with scratch_file(beside) as name:
            yield name


def to_bytes(save_fn, beside):
    """What ``save_fn(file_name)`` writes, as bytes.

    Parameters
    ----------
    save_fn : callable
        E.g. ``net.save_parameters`` or ``trainer.save_states``.
    beside : str
        The file the bytes are for (e.g. ``{prefix}_last.ckpt``); only used without
        ``memfd_create``, for the scratch file's folder and name.

    Returns
    -------
    bytes
    """
    with _named_scratch(beside) as name:
        save_fn(name)
        with open(name, 'rb') as f:
            return f.read()


def from_bytes(blob, load_fn, beside):
    """Call ``load_fn(file_name)`` on a file holding ``blob``.

    Parameters
    ----------
    blob : bytes
        What :func:`to_bytes` returned.
    load_fn : callable
        E.g. ``lambda f: net.load_parameters(f, ctx=ctx)`` or ``trainer.load_states``.
    beside : str
        As for :func:`to_bytes` (the checkpoint the blob came from).
    """
    with _named_scratch(beside) as name:
        with open(name, 'wb') as f:
            f.write(blob)
        return load_fn(name)


def _saved_value(param):
    # what Parameter._reduce gives save_parameters, as numpy, without its copy of every array
    # at once (and none at all for a dense array on the CPU)
    block = param.list_data()
    if len(block) > 1:
        return (mx.nd.add_n(*(w.copyto(mx.cpu()) for w in block)) / len(block)).asnumpy()
    if block[0].stype == 'default' and block[0].context.device_type == 'cpu':
        return _cpu_view(block[0])
    return block[0].asnumpy()


def params_blob(net):
    """``net.save_parameters``' bytes as a :class:`~gluontrain.core.streamed_pickle.StreamedBlob`:
    the same file content, written one array at a time (a dense, non-numpy-mode network).

    Parameters
    ----------
    net : mxnet.gluon.HybridBlock

    Returns
    -------
    StreamedBlob
    """
    params = net._collect_params_with_prefix()  # pylint: disable=protected-access
    arrays = {name: (lambda p=p: _saved_value(p)) for name, p in params.items()}
    size = mxparams.params_size({name: (p.shape, p.dtype) for name, p in params.items()})
    return StreamedBlob(lambda f: mxparams.write_params_to(f, arrays), size=size)


def export_streamed(net, path, epoch=0, remove_amp_cast=True):
    """``net.export(path, epoch)``: the same ``{path}-symbol.json`` and ``{path}-NNNN.params``
    (byte for byte), the weights written one array at a time.

    ``export`` copies every parameter (``Parameter._reduce``) into one dict before
    ``mx.nd.save`` writes it: a second copy of the whole model at the end of training (14 MiB
    above the run's resident memory for the VOC mobilenet0.25 YOLOv3; docs/performance.md).

    Parameters
    ----------
    net : mxnet.gluon.HybridBlock
        Hybridized and run forward at least once, as ``export`` requires.
    path : str
    epoch : int
    remove_amp_cast : bool
        As ``export``'s.
    """
    # pylint: disable=protected-access
    if mx.util.is_np_array():  # numpy-mode networks save with npx.save's own layout
        net.export(path, epoch, remove_amp_cast=remove_amp_cast)
        return
    if not net._cached_graph:
        raise RuntimeError('call hybridize() and run the network forward once before exporting')
    sym = net._cached_graph[1]
    sym.save('%s-symbol.json' % path, remove_amp_cast=remove_amp_cast)
    arg_names, aux_names = set(sym.list_arguments()), set(sym.list_auxiliary_states())
    arrays = {}
    for is_arg, param in net._cached_op_args:
        if is_arg:
            continue  # an input of the graph, not a parameter
        # the names, kinds and order export gives them
        if param.name in arg_names:
            kind = 'arg'
        elif param.name in aux_names:
            kind = 'aux'
        else:
            warnings.warn('Parameter "{}" is not found in the graph. '.format(param.name),
                          stacklevel=2)
            continue
        arrays['{}:{}'.format(kind, param.name)] = lambda p=param: _saved_value(p)
    with open('%s-%04d.params' % (path, epoch), 'wb') as f:
        mxparams.write_params_to(f, arrays)


def _cpu_view(arr):
    """A numpy view of a dense CPU NDArray's own memory (no copy); valid while ``arr`` lives."""
    arr.wait_to_read()
    ptr = ctypes.c_void_p()
    check_call(_LIB.MXNDArrayGetData(arr.handle, ctypes.byref(ptr)))
    dtype = np.dtype(arr.dtype)
    if not arr.size:
        return np.zeros(arr.shape, dtype)
    raw = (ctypes.c_char * (arr.size * dtype.itemsize)).from_address(ptr.value)
    return np.frombuffer(raw, dtype=dtype).reshape(arr.shape)


class _StatesPickler(pickle.Pickler):
    """Pickle dense CPU NDArrays as ``mx.nd.array(view, ctx, dtype)``: written from their own
    memory, where NDArray's pickling copies each array's bytes and the memo keeps every copy
    until the end."""

    def reducer_override(self, obj):  # pylint: disable=missing-function-docstring
        if (isinstance(obj, mx.nd.NDArray) and obj.stype == 'default'
                and obj.context.device_type == 'cpu'):
            return mx.nd.array, (_cpu_view(obj), obj.context, obj.dtype)
        return NotImplemented


def trainer_states_blob(trainer, beside):
    """What ``trainer.save_states`` writes, streamed: ``(updater states, optimizer)`` pickled as
    MXNet's ``Updater.get_states(dump_optimizer=True)`` pickles them, the states' arrays
    written from their own memory. ``trainer.load_states`` reads it back.

    Parameters
    ----------
    trainer : mxnet.gluon.Trainer
    beside : str
        As for :func:`to_bytes` (the checkpoint the states are for).

    Returns
    -------
    StreamedBlob or bytes
        ``bytes`` from ``save_states`` itself where the optimizer lives in a kvstore
        (``update_on_kvstore``: distributed training).
    """
    # pylint: disable=protected-access
    if not trainer._kv_initialized:
        trainer._init_kvstore()
    if trainer._params_to_init:
        trainer._init_params()
    if trainer._update_on_kvstore:
        return to_bytes(trainer.save_states, beside)
    updater = trainer._updaters[0]
    return StreamedBlob(lambda f: _StatesPickler(f, protocol=5).dump(
        (updater.states, updater.optimizer)))


#: what a trainer-states blob references besides plain numpy data: MXNet's own format
#: (``Trainer.save_states``: NDArrays pickled as bytes) and ours (:func:`trainer_states_blob`:
#: ``mx.nd.array`` of a numpy array, a context, a dtype)
_TRAINER_GLOBALS = {('builtins', 'bytearray'), ('mxnet.ndarray.ndarray', 'NDArray'),
                    ('mxnet.context', 'Context'), ('mxnet.ndarray.utils', 'array')}
#: modules whose classes may appear when they are optimizers or LR schedules
_TRAINER_CLASS_MODULES = ('mxnet.optimizer.optimizer', 'mxnet.optimizer', 'mxnet.lr_scheduler',
                          'gluoncv.utils.lr_scheduler')


def _trainer_global(module, name):
    """Whether a trainer-states pickle may resolve ``module.name``: the globals above, numpy's
    scalar types, and the optimizer and LR-schedule classes of MXNet and GluonCV (checked as
    subclasses after the attribute is looked up, never called)."""
    if (module, name) in _TRAINER_GLOBALS:
        return True
    if module == 'numpy':
        return isinstance(getattr(np, name, None), type) and issubclass(getattr(np, name),
                                                                         np.generic)
    if module in _TRAINER_CLASS_MODULES:
        value = getattr(importlib.import_module(module), name, None)
        return isinstance(value, type) and issubclass(
            value, (mx.optimizer.Optimizer, mx.lr_scheduler.LRScheduler))
    return False


def check_trainer_states(blob, path):
    """``blob`` (a checkpoint's trainer states) when it is safe to hand to MXNet, whose
    ``Trainer.load_states`` unpickles it with plain ``pickle.loads``: read once with the
    checkpoint's restricted unpickler, admitting only what :func:`trainer_states_blob` and
    ``Trainer.save_states`` write.

    Raises
    ------
    gluontrain.core.checkpoint.RefusedPickle
        The blob references anything else (``os.system`` through ``__reduce__``); ``path`` is
        named and nothing of the blob has run.
    """
    try:
        loads_state(blob, path, allow=_trainer_global)
    except (pickle.UnpicklingError, EOFError, AttributeError, IndexError, TypeError,
            UnicodeDecodeError, mx.base.MXNetError) as e:
        raise ValueError('{}: its trainer states cannot be read ({}); pass the {{prefix}}_last.ckpt '
                         'a run of this version wrote'.format(path, e)) from e
    return blob
