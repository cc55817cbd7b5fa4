"""SGB's Checkpointer: files, last_checkpoint, exact restore (optimizer, scheduler, RNG),
load_mapping of a detector checkpoint, clear errors."""
import os
import random

import numpy as np
import pytest
import torch

from gluontrain.torch.sgg.checkpoint import LAST_CHECKPOINT, Checkpointer, load_weights_file
from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.sgg.solver import WarmupMultiStepLR


class Box(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.feature_extractor = torch.nn.Linear(3, 2)


class Relation(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.box_feature_extractor = torch.nn.Linear(3, 2)
        self.predictor = torch.nn.Linear(2, 2)


class Heads(torch.nn.Module):
    def __init__(self, relation=True):
        super().__init__()
        self.box = Box()
        if relation:
            self.relation = Relation()


class Model(torch.nn.Module):
    def __init__(self, relation=True):
        super().__init__()
        self.roi_heads = Heads(relation)


def _setup(tmp_path):
    torch.manual_seed(0)
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = WarmupMultiStepLR(opt, (2,), warmup_iters=2)
    return model, opt, sched, Checkpointer(get_cfg(), model, opt, sched, str(tmp_path))


def test_save_writes_sgb_files_and_restores_everything(tmp_path):
    model, opt, sched, ckpt = _setup(tmp_path)
    loss = model.roi_heads.relation.predictor(model.roi_heads.box.feature_extractor(
        torch.ones(1, 3))).sum()
    loss.backward()
    opt.step()
    sched.step()
    path = ckpt.save('model_{:07d}'.format(7), hooks_state={'H': {'x': 1}}, iteration=7)
    assert path == os.path.join(str(tmp_path), 'model_0000007.pth')
    assert (tmp_path / LAST_CHECKPOINT).read_text() == 'model_0000007.pth'
    raw = torch.load(path, weights_only=True)  # SGB's keys, readable by torch alone
    assert {'model', 'optimizer', 'scheduler', 'iteration'} <= set(raw)
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    lr = opt.param_groups[0]['lr']
    draws = (random.random(), np.random.rand(), torch.rand(1).item())

    model2, opt2, sched2, ckpt2 = _setup(tmp_path)
    random.seed(5)
    assert ckpt2.has_checkpoint()
    extra = ckpt2.load('ignored-when-last_checkpoint-exists.pth')
    assert extra['iteration'] == 7 and extra['hooks'] == {'H': {'x': 1}}
    for k, v in model2.state_dict().items():
        assert torch.equal(v, expected[k]), k
    assert opt2.param_groups[0]['lr'] == lr and sched2.last_epoch == sched.last_epoch
    assert opt2.state_dict()['state'][0]['momentum_buffer'] is not None
    # the RNG states of the save: the next draws are those after the save
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == draws


def test_scheduler_not_restored_is_sgb_behaviour(tmp_path):
    _, opt, sched, ckpt = _setup(tmp_path)
    for _ in range(3):
        sched.step()
    ckpt.save('model_final', iteration=3)
    _, opt2, sched2, ckpt2 = _setup(tmp_path)
    ckpt2.load(restore_scheduler=False)
    assert sched2.last_epoch == 0  # SGB: the schedule restarts (warmup again)
    _, opt3, sched3, ckpt3 = _setup(tmp_path)
    ckpt3.load(restore_scheduler=False, update_schedule=True)
    assert sched3.last_epoch == 3  # UPDATE_SCHEDULE_DURING_LOAD: last_epoch = iteration


def test_sgb_absolute_last_checkpoint_is_read(tmp_path):
    model, _, _, ckpt = _setup(tmp_path)
    ckpt.save('model_0000001', iteration=1)
    (tmp_path / LAST_CHECKPOINT).write_text(str(tmp_path / 'model_0000001.pth'))
    assert ckpt.get_checkpoint_file() == str(tmp_path / 'model_0000001.pth')


def test_detector_checkpoint_loaded_with_load_mapping(tmp_path):
    det = Model(relation=False)
    torch.save({'model': det.state_dict()}, str(tmp_path / 'det.pth'))
    model, _, _, _ = _setup(tmp_path / 'out')
    ckpt = Checkpointer(get_cfg(), model, save_dir=str(tmp_path / 'out'))
    before = model.roi_heads.relation.predictor.weight.clone()
    ckpt.load(str(tmp_path / 'det.pth'), with_optim=False, load_mapping={
        'roi_heads.relation.box_feature_extractor': 'roi_heads.box.feature_extractor'})
    src = det.roi_heads.box.feature_extractor
    assert torch.equal(model.roi_heads.relation.box_feature_extractor.weight, src.weight)
    assert torch.equal(model.roi_heads.box.feature_extractor.bias, src.bias)
    assert torch.equal(model.roi_heads.relation.predictor.weight, before)  # no match: kept


def test_bad_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match='MODEL.PRETRAINED_DETECTOR_CKPT .*nope.pth'):
        load_weights_file(str(tmp_path / 'nope.pth'), 'MODEL.PRETRAINED_DETECTOR_CKPT')
    bad = tmp_path / 'bad.pth'
    bad.write_bytes(b'not a torch file')
    with pytest.raises(ValueError, match='bad.pth is not a PyTorch weights file'):
        load_weights_file(str(bad))
    other = torch.nn.Linear(5, 5)
    torch.save(other.state_dict(), str(tmp_path / 'other.pth'))
    ckpt = Checkpointer(get_cfg(), torch.nn.Sequential(torch.nn.Linear(3, 3)), save_dir='')
    with pytest.raises(ValueError, match='other.pth'):
        ckpt.load(str(tmp_path / 'other.pth'), with_optim=False)
