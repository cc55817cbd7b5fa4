"""TrainBatchify: GluonCV's YOLOv3 train batches, in one buffer that travels as one array."""
import multiprocessing
import multiprocessing.reduction
import os
import pickle

import numpy as np
import pytest

import gluontrain.mx  # noqa: F401  (imports gluoncv through the shim)
import mxnet as mx

from gluontrain.mx.yolo3.batchify import Batch, TrainBatchify, reference_train_batchify

SHARED = mx.Context('cpu_shared', 0)


def _samples(rng, n=4, side=64, classes=20, boxes=None):
    cells = 3 * sum((side // s) ** 2 for s in (32, 16, 8))
    out = []
    for i in range(n):
        m = boxes[i] if boxes is not None else rng.randint(1, 9)
        out.append((rng.standard_normal((3, side, side)).astype(np.float32),) +
                   tuple(rng.standard_normal((cells, c)).astype(np.float32)
                         for c in (1, 2, 2, 2, classes)) +
                   (rng.uniform(0, side, (m, 4)).astype(np.float32),))
    return out


def _same_as_reference(ours, ref):
    assert len(ours) == len(ref) == 7
    for o, r in zip(ours, ref):
        assert o.shape == r.shape and o.dtype == r.dtype
        assert np.array_equal(o.asnumpy(), r.asnumpy())


def test_equal_to_gluoncv_with_boxes_padded_by_minus_one():
    rng = np.random.RandomState(0)
    for boxes in ([3, 1, 7, 2], [5, 5, 5, 5], [1], [0, 4, 0, 1]):
        samples = _samples(rng, n=len(boxes), boxes=boxes)
        ours, ref = TrainBatchify()(samples), reference_train_batchify()(samples)
        _same_as_reference(ours, ref)
        assert isinstance(ours, Batch) and all(a.context == mx.cpu() for a in ours)
        assert (ours[6].asnumpy()[0, boxes[0]:] == -1).all()


def test_other_samples_go_through_gluoncv():
    rng = np.random.RandomState(1)
    # no box in any image, boxes as float64, images as NDArrays: GluonCV's own functions
    no_box = _samples(rng, boxes=[0, 0, 0, 0])
    f64 = [s[:6] + (s[6].astype(np.float64),) for s in _samples(rng)]
    nd_img = [(mx.nd.array(s[0]),) + s[1:] for s in _samples(rng)]
    for samples in (no_box, f64, nd_img):
        ours = TrainBatchify()(samples)
        assert not isinstance(ours, Batch)
        _same_as_reference(ours, reference_train_batchify()(samples))


def test_samples_of_different_shapes_are_refused():
    rng = np.random.RandomState(2)
    samples = _samples(rng, n=2)
    samples[1] = (samples[1][0][:, :32],) + samples[1][1:]
    with pytest.raises(ValueError):
        TrainBatchify()(samples)


def _sent(batch, monkeypatch):
    """What a GluonCV / Gluon loader worker does with its batch, and the main process after;
    and the file descriptors that went with it."""
    sent = []
    dup = multiprocessing.reduction.DupFd
    monkeypatch.setattr(multiprocessing.reduction, 'DupFd', lambda fd: sent.append(fd) or dup(fd))
    data = multiprocessing.reduction.ForkingPickler.dumps(batch, pickle.HIGHEST_PROTOCOL)
    monkeypatch.setattr(multiprocessing.reduction, 'DupFd', dup)
    return pickle.loads(data), sent


def test_a_workers_batch_travels_as_one_memfd_and_is_mapped(monkeypatch):
    rng = np.random.RandomState(3)
    samples = _samples(rng)
    monkeypatch.setattr(multiprocessing, 'parent_process', lambda: 'a loader worker')
    batch = TrainBatchify()(samples)
    monkeypatch.undo()
    assert batch.fd is not None
    got, sent = _sent(batch, monkeypatch)
    assert sent == [batch.fd]  # one file descriptor for the seven arrays (GluonCV's: seven)
    ref = reference_train_batchify()(samples)
    _same_as_reference(got, ref)
    assert all(a.context == mx.cpu() for a in got)
    # the same pages: what the worker wrote after sending shows (nothing is copied)
    batch.flat[:1] = 7
    mx.nd.waitall()
    assert got[0].asnumpy().flat[0] == 7
    fd = batch.fd
    del batch
    with pytest.raises(OSError):
        os.fstat(fd)  # closed with the worker's batch


def test_a_main_process_batch_pickles_as_one_shared_ndarray(monkeypatch):
    rng = np.random.RandomState(4)
    samples = _samples(rng)
    batch = TrainBatchify()(samples)
    assert batch.fd is None and all(a.context == mx.cpu() for a in batch)
    got, sent = _sent(batch, monkeypatch)
    assert len(sent) == 1  # MXNet's reducer, once for the flat array
    _same_as_reference(got, reference_train_batchify()(samples))
    assert all(a.context == SHARED for a in got)


def test_small_when_sent_to_the_workers():
    batchify = TrainBatchify()
    batchify(_samples(np.random.RandomState(5), boxes=[0, 0, 0, 0]))  # builds the fallback
    assert len(pickle.dumps(batchify)) < 200


def test_a_worker_without_memfd_sends_one_shared_ndarray(monkeypatch):
    rng = np.random.RandomState(6)
    samples = _samples(rng)
    monkeypatch.setattr(multiprocessing, 'parent_process', lambda: 'a loader worker')
    monkeypatch.delattr(os, 'memfd_create')  # macOS, or a sandbox that refuses it
    batch = TrainBatchify()(samples)
    monkeypatch.undo()
    assert batch.fd is None
    got, sent = _sent(batch, monkeypatch)
    assert len(sent) == 1
    _same_as_reference(got, reference_train_batchify()(samples))
