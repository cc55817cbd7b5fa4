"""The YOLOv3 train batch in one buffer: GluonCV's ``Tuple(Stack() x 6, Pad(axis=0,
pad_val=-1))`` for the numpy samples of :class:`~.fast_transform.FastYOLO3TrainTransform`.

:class:`TrainBatchify` writes the seven fields once, into one float32 buffer, and wraps it
without a copy (``mx.nd.from_numpy``); the fields are NDArray views of it, on ``cpu(0)``.
In a loader worker process the buffer is an anonymous shared-memory file (``memfd_create``,
:class:`gluontrain.yolo3.data.SharedBuffers`), reused once the main process has released the
batch it carried: one file descriptor per batch, mapped by the main process with no copy (no
``/dev/shm`` space either); without ``memfd_create`` it is plain memory and MXNet's reducer
sends it as one shared NDArray. Why and what it saved: docs/performance.md, "The YOLOv3 train
loader (CPU)". The values, shapes and dtypes are GluonCV's
(``tests/mx/yolo3/test_yolo3_batchify.py``); samples of another kind (not float32 numpy
arrays, no boxes at all) go through GluonCV's own functions."""
import multiprocessing
import multiprocessing.reduction

import numpy as np
import mxnet as mx

from gluoncv.data.batchify import Pad, Stack, Tuple

from ...yolo3.data import SharedBuffers, field_views, map_shared

__all__ = ['Batch', 'TrainBatchify', 'reference_train_batchify']

#: GluonCV's padding value for the ground-truth boxes
PAD_VALUE = -1


def reference_train_batchify():
    """GluonCV's train batchify of ``train_yolo3.py``: stack the image and the five targets,
    pad the ground-truth boxes with -1."""
    return Tuple(*([Stack() for _ in range(6)] + [Pad(axis=0, pad_val=PAD_VALUE)]))


def _fits(samples):
    """Whether every field of every sample is a float32 numpy array and some box exists."""
    for sample in samples:
        if len(sample) != 7:
            return False
        for a in sample:
            if not isinstance(a, np.ndarray) or a.dtype != np.float32:
                return False
    return max(s[6].shape[0] for s in samples) > 0



#: this process's batch buffers when it is a loader worker
_BUFFERS = SharedBuffers()


def _mapped(dup_fd, size, shapes):
    """The main process's side of a batch a worker sent: its buffer mapped, the same pages
    (given back to the worker when the batch's arrays are gone)."""
    return Batch(mx.nd.from_numpy(map_shared(dup_fd.detach(), size), zero_copy=True), shapes)


class Batch(tuple):
    """The seven batch NDArrays, views of one flat NDArray.

    Pickled (by a loader worker, once) it travels as its shared buffer's descriptor when it
    has one, else as the flat NDArray (MXNet's reducer: one shared-memory copy).
    """

    def __new__(cls, flat, shapes, shared=None):
        batch = super().__new__(cls, field_views(flat, shapes))
        batch.flat, batch.shapes, batch.shared = flat, shapes, shared
        return batch

    @property
    def fd(self):
        """The shared buffer's file descriptor (None: not in shared memory)."""
        return None if self.shared is None else self.shared.fd

    def __reduce__(self):
        if self.shared is not None:
            return _mapped, (multiprocessing.reduction.DupFd(self.shared.fd), self.flat.size,
                             self.shapes)
        return Batch, (self.flat, self.shapes)


class TrainBatchify:
    """``Tuple(Stack() x 6, Pad(axis=0, pad_val=-1))`` writing into one buffer.

    Called with a list of samples ``(image, objectness, center, scale, weights, class,
    gt_boxes)`` (float32 numpy arrays), returns a :class:`Batch` of seven NDArrays equal to
    GluonCV's: the six stacked fields and the boxes padded with -1 to the longest. Any other
    samples are handed to GluonCV's functions.
    """

    def __init__(self):
        self._reference = None

    def __call__(self, samples):
        if not _fits(samples):
            if self._reference is None:
                self._reference = reference_train_batchify()
            return self._reference(samples)
        n = len(samples)
        shapes = [(n,) + a.shape for a in samples[0][:6]]
        longest = max(s[6].shape[0] for s in samples)
        shapes.append((n, longest) + samples[0][6].shape[1:])
        size = sum(int(np.prod(s)) for s in shapes)
        # a loader worker's batch is pickled to the main process: build it in shared memory
        flat, shared = _BUFFERS.get(size) if multiprocessing.parent_process() is not None \
            else (np.empty(size, np.float32), None)
        fields = field_views(flat, shapes)
        for k in range(6):
            for i, sample in enumerate(samples):
                fields[k][i] = sample[k]  # a shape that differs raises, as np.asarray's stack
        boxes = fields[6]
        boxes.fill(PAD_VALUE)
        for i, sample in enumerate(samples):
            boxes[i, :sample[6].shape[0]] = sample[6]
        return Batch(mx.nd.from_numpy(flat, zero_copy=True), shapes, shared)

    def __getstate__(self):
        return {'_reference': None}  # sent to the loader workers with every batch: keep it small
