"""TrainCollate: the YOLOv3 train batch of the PyTorch recipe written once into one buffer,
in a loader worker a reused shared-memory one; the tensors of GluonCV's
``Tuple(Stack() x 6, Pad(axis=0, pad_val=-1))`` (the torch port, gluontrain.torch.batchify)."""
import gc
import multiprocessing.reduction
import pickle

import numpy as np
import pytest
import torch

from gluontrain.torch.yolo3 import data
from gluontrain.yolo3.data import SharedBuffers


def _samples(rng, boxes, side=64, classes=20):
    cells = 3 * sum((side // s) ** 2 for s in (32, 16, 8))
    return [(rng.standard_normal((3, side, side)).astype(np.float32),) +
            tuple(rng.standard_normal((cells, c)).astype(np.float32) for c in (1, 2, 2, 2, classes)) +
            (rng.uniform(0, side, (m, 4)).astype(np.float32),) for m in boxes]


def _equal(ours, ref):
    assert len(ours) == len(ref) == 7
    for o, r in zip(ours, ref):
        assert o.dtype == r.dtype and o.shape == r.shape
        assert torch.equal(o, r)


@pytest.fixture(name='buffers')
def fresh_buffers(monkeypatch):
    buffers = SharedBuffers()
    monkeypatch.setattr(data, '_BUFFERS', buffers)
    return buffers


def _in_worker(samples, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(torch.utils.data, 'get_worker_info', lambda: 'a loader worker')
        return data.train_collate()(samples)


def _sent(batch, monkeypatch):
    sent = []
    dup = multiprocessing.reduction.DupFd
    with monkeypatch.context() as m:
        m.setattr(multiprocessing.reduction, 'DupFd', lambda fd: sent.append(fd) or dup(fd))
        blob = multiprocessing.reduction.ForkingPickler.dumps(batch, pickle.HIGHEST_PROTOCOL)
    return pickle.loads(blob), sent


def test_the_reference_tensors_with_boxes_padded_by_minus_one():
    rng = np.random.RandomState(0)
    for boxes in ([3, 1, 7, 2], [5, 5], [1], [0, 4, 0, 1]):
        samples = _samples(rng, boxes)
        ours = data.train_collate()(samples)
        _equal(ours, data._reference_collate()(samples))  # pylint: disable=protected-access
        assert all(t.dtype == torch.float32 for t in ours)
        assert (ours[6][0, boxes[0]:] == -1).all()


def test_other_samples_go_through_the_reference():
    rng = np.random.RandomState(1)
    for samples in (_samples(rng, [0, 0]),
                    [s[:6] + (s[6].astype(np.float64),) for s in _samples(rng, [2, 1])]):
        _equal(data.train_collate()(samples), data._reference_collate()(samples))  # noqa: E501  pylint: disable=protected-access


def test_a_workers_batch_travels_as_one_descriptor_and_is_reused_once_released(monkeypatch,
                                                                                buffers):
    rng = np.random.RandomState(2)
    samples = _samples(rng, [2, 3])
    batch = _in_worker(samples, monkeypatch)
    got, sent = _sent(batch, monkeypatch)
    assert sent == [batch.shared.fd] and type(got) is tuple  # pylint: disable=unidiomatic-typecheck
    _equal(got, data._reference_collate()(samples))  # pylint: disable=protected-access
    fd = batch.shared.fd
    del batch
    batch2 = _in_worker(_samples(rng, [2, 3]), monkeypatch)
    assert batch2.shared.fd != fd  # the main process still holds the first batch
    del batch2
    kept = got[4]
    del got
    gc.collect()
    assert _in_worker(_samples(rng, [2, 3]), monkeypatch).shared.fd != fd  # one tensor left
    del kept
    gc.collect()
    third = _samples(rng, [2, 3])
    batch3 = _in_worker(third, monkeypatch)
    assert batch3.shared.fd == fd and len(buffers.buffers) == 3
    _equal(_sent(batch3, monkeypatch)[0], data._reference_collate()(third))  # noqa: E501  pylint: disable=protected-access


class _Samples(torch.utils.data.Dataset):
    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        return self.samples[idx]


def test_a_worker_process_gives_the_main_processs_batches():
    samples = _samples(np.random.RandomState(3), [1, 4, 2, 3, 5, 1, 2, 2])
    batches = []
    for workers in (0, 1):
        loader = torch.utils.data.DataLoader(_Samples(samples), batch_size=2,
                                             collate_fn=data.train_collate(),
                                             num_workers=workers)
        batches.append(list(loader))  # all held: the worker never writes into them again
    assert len(batches[1]) == 4
    for ours, ref in zip(*batches):
        _equal(ours, ref)
