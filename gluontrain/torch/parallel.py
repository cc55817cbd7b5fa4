"""Gluon's single-process multi-device idioms for PyTorch: ``--gpus`` and ``split_and_load``.

GluonCV scripts take ``--gpus '0,1,2,3'``, build a list of contexts and cut every batch into
one slice per device with ``gluon.utils.split_and_load``. :func:`get_devices` and
:func:`split_and_load` do the same with ``torch.device`` and tensors, slice sizes included.
(For multi-GPU training in PyTorch, one process per GPU with
:mod:`gluontrain.torch.distributed` is faster; these serve single-process code and ports.)
"""
import numpy as np
import torch

from ..core.devices import check_gpu_ids, parse_gpu_ids

__all__ = ['get_devices', 'split_data', 'split_and_load']


def get_devices(gpus='0', cpus=0):
    """The list of devices a run uses, from GluonCV's ``--gpus`` string.

    Parameters
    ----------
    gpus : str
        ``'0,1,2,3'`` or a range ``'0-3'``; ``''`` means the CPU.
    cpus : int, default 0
        When > 0, return ``cpus`` CPU devices instead, so that CPU runs take the same
        multi-device path (one slice per device) as several GPUs, as ``--cpus`` does for the
        MXNet backend.

    Returns
    -------
    list of torch.device

    Raises
    ------
    ValueError
        For a malformed ``--gpus``, or ids beyond ``torch.cuda.device_count()``.
    """
    if cpus and cpus > 0:
        return [torch.device('cpu')] * int(cpus)
    ids = parse_gpu_ids(gpus)
    if not ids:
        return [torch.device('cpu')]
    check_gpu_ids(gpus, ids, torch.cuda.device_count(), 'PyTorch',
                  ' (this torch build has no CUDA)' if not torch.backends.cuda.is_built() else '')
    return [torch.device('cuda', i) for i in ids]


def split_data(data, num_slice, batch_axis=0, even_split=True):
    """Split ``data`` into ``num_slice`` slices along ``batch_axis``, as ``gluon.utils.split_data``.

    Parameters
    ----------
    data : torch.Tensor
    num_slice : int
    batch_axis : int, default 0
    even_split : bool, default True
        Raise when ``num_slice`` does not divide the batch. Otherwise the first
        ``size % num_slice`` slices are one element longer (and trailing slices are empty when
        the batch is smaller than ``num_slice``).

    Returns
    -------
    list of torch.Tensor
        Views of ``data``; a list even when ``num_slice`` is 1.

    Raises
    ------
    ValueError
        When ``even_split`` and the batch does not divide evenly.
    """
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ValueError(
            'data with shape {} cannot be evenly split into {} slices along axis {}. Use a '
            'batch size that\'s multiple of {} or set even_split=False to allow uneven '
            'partitioning of data.'.format(tuple(data.shape), num_slice, batch_axis, num_slice))
    # Gluon's partition, numpy.array_split's: the first size % num_slice slices are longer
    return list(torch.tensor_split(data, num_slice, dim=batch_axis))


def split_and_load(data, devices, batch_axis=0, even_split=True, non_blocking=False):
    """Split a batch into one slice per device and move each slice there.

    The PyTorch form of ``gluon.utils.split_and_load``, with its semantics: one device means
    no split at all (and no divisibility check); non-tensor input becomes a ``float32`` tensor,
    as ``mx.nd.array`` makes it.

    Parameters
    ----------
    data : torch.Tensor or array-like
        A batch.
    devices : list of torch.device
        From :func:`get_devices`.
    batch_axis : int, default 0
    even_split : bool, default True
        See :func:`split_data`.
    non_blocking : bool, default False
        Passed to ``Tensor.to`` (asynchronous copies from pinned memory).

    Returns
    -------
    list of torch.Tensor
        ``len(devices)`` slices, slice i on ``devices[i]``.

    Examples
    --------
    >>> [x.shape[0] for x in split_and_load(torch.zeros(10, 3), [torch.device('cpu')] * 4,
    ...                                     even_split=False)]
    [3, 3, 2, 2]
    """
    if not isinstance(data, torch.Tensor):
        data = torch.from_numpy(np.asarray(data).astype(np.float32))
    if len(devices) == 1:
        return [data.to(devices[0], non_blocking=non_blocking)]
    slices = split_data(data, len(devices), batch_axis, even_split)
    return [part.to(device, non_blocking=non_blocking) for part, device in zip(slices, devices)]
