"""GluonCV's batchify functions for PyTorch: ``Stack``, ``Pad``, ``Append``, ``Tuple``.

Same shapes, values and dtype rules as ``gluoncv.data.batchify`` (docs/torch_idioms.md,
"Batchify dtypes"), returning ``torch.Tensor``; any of them is a ``DataLoader`` ``collate_fn``::

    loader = DataLoader(dataset, batch_size=8, shuffle=True, num_workers=4,
                        collate_fn=Tuple(Stack(), Pad(pad_val=-1)))"""
import logging

import numpy as np
import torch

__all__ = ['Stack', 'Pad', 'Append', 'Tuple']


def _as_float32(value):
    """``mx.nd.array(value)`` for non-tensors: a float32 copy (never a view of the sample)."""
    return torch.from_numpy(np.asarray(value).astype(np.float32))


class Stack:
    """Stack samples of equal shape into a batch with a new leading axis (tensors keep their
    dtype, anything else becomes ``float32``).

    Examples
    --------
    >>> Stack()([[1, 2, 3, 4], [4, 5, 6, 8]])
    tensor([[1., 2., 3., 4.],
            [4., 5., 6., 8.]])
    """

    def __call__(self, data):
        """Batchify ``data``, a list of samples: ``(len(data),) + sample shape``."""
        if isinstance(data[0], torch.Tensor):
            return torch.stack([torch.as_tensor(x) for x in data])
        return _as_float32(np.asarray(data))


def _normalise_axes(axis, ndim):
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    normalised = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError('Pad axis {} is out of range for samples with {} dimensions'
                             .format(a, ndim))
        normalised.append(a % ndim)
    return normalised


class Pad:
    """Pad samples to the largest size along ``axis`` and stack them.

    Parameters
    ----------
    axis : int or tuple of int, default 0
        The sample axis (or axes) to pad; negative values count from the end of the sample.
    pad_val : float or int, default 0
        The fill value, cast to the output dtype.
    num_shards : int, default 1
        Split the batch into this many shards (``numpy.array_split``), each padded to its own
        maximum; a list of tensors is returned then.
    ret_length : bool, default False
        Also return the ``int32`` lengths along ``axis`` (``(N,)``, or ``(N, len(axis))``).

    Examples
    --------
    >>> Pad(pad_val=-1, ret_length=True)([[1, 2, 3, 4], [4, 5, 6], [8, 2]])
    (tensor([[ 1,  2,  3,  4],
            [ 4,  5,  6, -1],
            [ 8,  2, -1, -1]]), tensor([4, 3, 2], dtype=torch.int32))
    """

    def __init__(self, axis=0, pad_val=0, num_shards=1, ret_length=False):
        if not isinstance(axis, (int, tuple, list)):
            raise TypeError('Pad axis must be an int, tuple or list, got {!r}'.format(axis))
        self._axis = axis
        self._pad_val = pad_val
        self._num_shards = num_shards
        self._ret_length = ret_length

    def __call__(self, data):
        """Batchify ``data`` (N tensors, numpy arrays or nested lists): ``(N, ...)`` (a list
        of shards when ``num_shards > 1``), and the lengths when ``ret_length``."""
        if not isinstance(data[0], (torch.Tensor, np.ndarray, list, tuple)):
            raise TypeError('Pad takes samples that are tensors, numpy arrays or lists, got {}'
                            .format(type(data[0]).__name__))
        if isinstance(data[0], torch.Tensor):
            samples = [torch.as_tensor(x) for x in data]
            numpy_dtype = torch.empty(0, dtype=samples[0].dtype).numpy().dtype
            new_full = lambda shape, fill: torch.full(shape, fill, dtype=samples[0].dtype)
        else:
            # numpy all the way, converted once at the end: read-only or shared sample arrays
            # are never aliased
            samples = [np.asarray(x) for x in data]
            numpy_dtype = samples[0].dtype
            new_full = lambda shape, fill: np.full(shape, fill, dtype=numpy_dtype)
        axes = _normalise_axes(self._axis, samples[0].ndim)
        lengths = np.array([[s.shape[a] for a in axes] for s in samples], dtype=np.int64)
        if len(samples) % self._num_shards:
            logging.getLogger('gluontrain').warning(
                'Pad: %d samples do not split evenly into %d shards', len(samples),
                self._num_shards)
        # numpy's unsafe cast, which is what mx.nd.full stores (-1 in uint8 is 255)
        fill = np.array(self._pad_val).astype(numpy_dtype).item()
        batches, shard_lengths, start = [], [], 0
        for shard in np.array_split(lengths, self._num_shards):
            shape = [len(shard)] + list(samples[start].shape)
            for a, size in zip(axes, shard.max(axis=0)):
                shape[1 + a] = int(size)
            out = new_full(shape, fill)
            for row, sample in enumerate(samples[start:start + len(shard)]):
                out[row][tuple(slice(0, n) for n in sample.shape)] = sample
            batches.append(torch.as_tensor(out))
            shard_lengths.append(torch.from_numpy(
                (shard if isinstance(self._axis, (tuple, list)) else shard[:, 0])
                .astype(np.int32)))
            start += len(shard)
        if self._num_shards == 1:
            batches, shard_lengths = batches[0], shard_lengths[0]
        return (batches, shard_lengths) if self._ret_length else batches


class Append:
    """Return the samples as a list of tensors, without stacking (any shapes); non-tensors
    become ``float32``. ``expand``: add a batch axis of size 1 at ``batch_axis``.

    Examples
    --------
    >>> [x.shape for x in Append()([[1, 2, 3, 4], [4, 5, 6], [8, 2]])]
    [torch.Size([1, 4]), torch.Size([1, 3]), torch.Size([1, 2])]
    """

    def __init__(self, expand=True, batch_axis=0):
        self._expand = expand
        self._batch_axis = batch_axis

    def __call__(self, data):
        """Batchify ``data`` into a list of ``len(data)`` tensors."""
        out = [x if isinstance(x, torch.Tensor) else _as_float32(x) for x in data]
        if self._expand:
            out = [x.unsqueeze(self._batch_axis) for x in out]
        return out


class Tuple:
    """Apply the i-th batchify function to the i-th field of every sample
    (``Tuple(A, B, C)`` or ``Tuple([A, B, C])``).

    Examples
    --------
    >>> images_and_labels = [(np.zeros((3, 4, 4)), [[0, 0, 1, 1, 2]]),
    ...                      (np.ones((3, 4, 4)), [[0, 0, 2, 2, 1], [1, 1, 3, 3, 0]])]
    >>> images, labels = Tuple(Stack(), Pad(pad_val=-1))(images_and_labels)
    >>> images.shape, labels.shape
    (torch.Size([2, 3, 4, 4]), torch.Size([2, 2, 5]))
    """

    def __init__(self, fn, *args):
        if isinstance(fn, (list, tuple)):
            if args:
                raise ValueError('Tuple takes Tuple(A, B, C) or Tuple([A, B, C]), not both')
            self._fn = tuple(fn)
        else:
            self._fn = (fn,) + args
        for i, field_fn in enumerate(self._fn):
            if not callable(field_fn):
                raise TypeError('batchify function {} is not callable: {!r}'.format(i, field_fn))

    def __call__(self, data):
        """A tuple with one batched entry per field of the samples in ``data``."""
        if len(data[0]) != len(self._fn):
            raise ValueError('each sample should have {} fields (one per batchify function), '
                             'got {}'.format(len(self._fn), len(data[0])))
        return tuple(field_fn([sample[i] for sample in data])
                     for i, field_fn in enumerate(self._fn))
