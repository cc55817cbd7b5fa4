"""TrainBatchify: GluonCV's YOLOv3 train batches, in one buffer that travels as one array."""
import gc
import multiprocessing
import multiprocessing.reduction
import os
import pickle

import numpy as np
import pytest

import gluontrain.mx  # noqa: F401  (imports gluoncv through the shim)
import mxnet as mx

from gluontrain.mx.yolo3 import batchify
from gluontrain.mx.yolo3.batchify import Batch, TrainBatchify, reference_train_batchify
from gluontrain.yolo3.data import SharedBuffers

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


@pytest.fixture(name='buffers')
def fresh_buffers(monkeypatch):
    """This process's worker buffers, empty (as in a new loader worker)."""
    buffers = SharedBuffers()
    monkeypatch.setattr(batchify, '_BUFFERS', buffers)
    return buffers


def _worker_batch(samples, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(multiprocessing, 'parent_process', lambda: 'a loader worker')
        return TrainBatchify()(samples)


def test_a_workers_batch_travels_as_one_memfd_and_is_mapped(monkeypatch, buffers):
    rng = np.random.RandomState(3)
    samples = _samples(rng)
    batch = _worker_batch(samples, monkeypatch)
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


def test_a_workers_buffer_is_reused_only_once_the_main_process_let_go(monkeypatch, buffers):
    """The worker's next batch goes into a new buffer while the main process still holds
    any array of the last one, and into the same pages once it has released them all."""
    rng = np.random.RandomState(7)
    first = _worker_batch(_samples(rng), monkeypatch)
    got, _ = _sent(first, monkeypatch)
    fd = first.fd
    del first
    view = got[2]  # one field kept: the buffer stays the main process's
    del got
    mx.nd.waitall()
    gc.collect()
    second_samples = _samples(rng)
    second = _worker_batch(second_samples, monkeypatch)
    assert second.fd != fd
    got2, _ = _sent(second, monkeypatch)
    del second
    before = view.asnumpy().copy()
    del view
    mx.nd.waitall()
    gc.collect()
    third_samples = _samples(rng)
    third = _worker_batch(third_samples, monkeypatch)
    assert third.fd == fd  # released: the same buffer, no new pages
    assert len(buffers.buffers) == 2
    got3, _ = _sent(third, monkeypatch)
    _same_as_reference(got3, reference_train_batchify()(third_samples))
    _same_as_reference(got2, reference_train_batchify()(second_samples))  # untouched
    assert not np.array_equal(before, got3[2].asnumpy())


def test_a_forked_worker_does_not_reuse_its_parents_buffers(monkeypatch, buffers):
    _, parents = buffers.get(16)
    monkeypatch.setattr(buffers, 'pid', -1)  # as a process forked from this one sees it
    parents.mapping[0] = 0  # released in the parent's main process
    _, own = buffers.get(16)
    assert own is not parents and buffers.buffers == [own]


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


def test_a_worker_without_memfd_sends_one_shared_ndarray(monkeypatch, buffers):
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
