"""SGB's Checkpointer: files, last_checkpoint, exact restore (optimizer, scheduler, RNG),
load_mapping of a detector checkpoint with its report, and one-line refusals (two-stage
snapshots, files that fill nothing, resumes that do not fill the model, catalog names).
SGB's own checkpoint layout with real scene-graph models: test_sgg_checkpoint_sgb.py.
"""
import logging
import os
import random
from collections import OrderedDict

import numpy as np
import pytest
import torch

from gluontrain.core.load_report import WeightsLoadError
from gluontrain.torch.frcnn.snapshot import save_snapshot
from gluontrain.torch.sgg.checkpoint import (FIX_DETECTOR_CKPT, FIX_WEIGHT, LAST_CHECKPOINT,
                                             TWO_STAGE, Checkpointer, load_weights_file)
from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.sgg.modeling.load_mapping import RELATION_LOAD_MAPPING
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


def _same(model, state):
    return all(torch.equal(v, state[k]) for k, v in model.state_dict().items())


def _listen(caplog):
    logger = logging.getLogger('sgg-checkpoint-test')
    logger.setLevel(logging.INFO)
    logger.addHandler(caplog.handler)
    return logger


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
    assert _same(model2, expected)
    assert opt2.param_groups[0]['lr'] == lr and sched2.last_epoch == sched.last_epoch
    assert opt2.state_dict()['state'][0]['momentum_buffer'] is not None
    # the RNG states of the save: the next draws are those after the save
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == draws
    report = ckpt2.last_report
    assert len(report.loaded) == report.total == 6 and not report.missing


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


def test_detector_checkpoint_loaded_with_load_mapping_and_reported(tmp_path, caplog):
    det = Model(relation=False)
    torch.save({'model': det.state_dict()}, str(tmp_path / 'det.pth'))
    model, _, _, _ = _setup(tmp_path / 'out')
    ckpt = Checkpointer(get_cfg(), model, save_dir=str(tmp_path / 'out'),
                        logger=_listen(caplog))
    before = model.roi_heads.relation.predictor.weight.clone()
    ckpt.load(str(tmp_path / 'det.pth'), with_optim=False, load_mapping={
        'roi_heads.relation.box_feature_extractor': 'roi_heads.box.feature_extractor'})
    src = det.roi_heads.box.feature_extractor
    assert torch.equal(model.roi_heads.relation.box_feature_extractor.weight, src.weight)
    assert torch.equal(model.roi_heads.box.feature_extractor.bias, src.bias)
    assert torch.equal(model.roi_heads.relation.predictor.weight, before)  # no match: kept
    # 2 box + 2 mapped of 6; the predictor reported as not found, the mapping as a line
    assert 'loaded 4 of 6 tensors from {} (2 missing'.format(tmp_path / 'det.pth') in caplog.text
    assert '  roi_heads.relation.predictor.{bias, weight}' in caplog.text
    assert ('roi_heads.relation.box_feature_extractor.* <- roi_heads.box.feature_extractor.* '
            '(2 tensors)') in caplog.text


def test_bad_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match='MODEL.PRETRAINED_DETECTOR_CKPT .*nope.pth'):
        load_weights_file(str(tmp_path / 'nope.pth'), 'MODEL.PRETRAINED_DETECTOR_CKPT')
    bad = tmp_path / 'bad.pth'
    bad.write_bytes(b'not a torch file')
    with pytest.raises(WeightsLoadError, match='checkpoint .*bad.pth'):
        load_weights_file(str(bad))
    torch.save([torch.zeros(1)], str(tmp_path / 'list.pth'))
    with pytest.raises(WeightsLoadError, match='list.pth holds a list, not a state dict'):
        load_weights_file(str(tmp_path / 'list.pth'))


def test_a_file_that_fills_nothing_is_refused_and_changes_nothing(tmp_path):
    other = torch.nn.Linear(5, 5)
    torch.save(other.state_dict(), str(tmp_path / 'other.pth'))
    model = torch.nn.Sequential(torch.nn.Linear(3, 3))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ckpt = Checkpointer(get_cfg(), model, save_dir='')
    with pytest.raises(WeightsLoadError, match=r'MODEL.WEIGHT .*other.pth: loaded 0 of 2 '
                                               r'tensors; .*; pass as MODEL.WEIGHT'):
        ckpt.load(str(tmp_path / 'other.pth'), with_optim=False, what='MODEL.WEIGHT',
                  fix=FIX_WEIGHT)
    assert _same(model, before)


def _two_stage_snapshot(path):
    """seamseg's model_last.pth.tar layout, written by the frcnn recipe's own writer."""
    save_snapshot(str(path), '[general]\n', 3, 0.1, 0.2, 100,
                  body={'mod1.conv1.weight': torch.zeros(4, 3, 3, 3),
                        'mod1.bn1.num_batches_tracked': torch.tensor(0)},
                  rpn_head={'conv_fc.weight': torch.zeros(4, 4, 3, 3)},
                  roi_head={'fc.fc6.weight': torch.zeros(8, 4)},
                  optimizer={'state': {}, 'param_groups': []})


@pytest.mark.parametrize('given_as', ['MODEL.PRETRAINED_DETECTOR_CKPT', 'MODEL.WEIGHT',
                                      'last_checkpoint'])
def test_two_stage_snapshot_is_refused_by_every_loader(tmp_path, given_as):
    snap = tmp_path / 'out' / 'model_last.pth.tar'
    snap.parent.mkdir()
    _two_stage_snapshot(snap)
    model, _, _, ckpt = _setup(tmp_path / 'out')
    before = {k: v.clone() for k, v in model.state_dict().items()}
    if given_as == 'last_checkpoint':
        (tmp_path / 'out' / LAST_CHECKPOINT).write_text('model_last.pth.tar')
        call, fix = (lambda: ckpt.load()), 'last_checkpoint names this file'
    else:
        fix = FIX_DETECTOR_CKPT if given_as.endswith('CKPT') else FIX_WEIGHT
        call = (lambda: ckpt.load(str(snap), with_optim=False, what=given_as, fix=fix,
                                  load_mapping=RELATION_LOAD_MAPPING))
    with pytest.raises(WeightsLoadError) as err:
        call()
    message = str(err.value)
    assert '\n' not in message and str(snap) in message and TWO_STAGE in message
    assert fix in message
    assert message.startswith('resume checkpoint' if given_as == 'last_checkpoint' else given_as)
    assert _same(model, before)


def test_resume_whose_model_loads_nothing_is_refused(tmp_path):
    model, opt, sched, ckpt = _setup(tmp_path)
    path = ckpt.save('model_0000003', iteration=3)
    saved = torch.load(path, weights_only=True)
    saved['model'] = OrderedDict(('renamed.' + k, v) for k, v in saved['model'].items())
    torch.save(saved, path)
    model2, _, sched2, ckpt2 = _setup(tmp_path)
    before = {k: v.clone() for k, v in model2.state_dict().items()}
    with pytest.raises(WeightsLoadError, match=r'^resume checkpoint .*model_0000003.pth: '
                                               r'loaded 0 of 6 tensors; .*last_checkpoint'):
        ckpt2.load()
    assert _same(model2, before) and sched2.last_epoch == 0   # nothing restored


def test_resume_that_leaves_tensors_unfilled_is_refused(tmp_path):
    _, _, _, ckpt = _setup(tmp_path)
    path = ckpt.save('model_0000003', iteration=3)
    saved = torch.load(path, weights_only=True)
    del saved['model']['roi_heads.relation.predictor.bias']
    torch.save(saved, path)
    _, _, _, ckpt2 = _setup(tmp_path)
    with pytest.raises(WeightsLoadError, match=r'loaded 5 of 6 tensors \(1 missing.*'
                                               r'roi_heads.relation.predictor.bias'):
        ckpt2.load()


def test_catalog_names_and_urls_are_refused_with_the_address(tmp_path):
    ckpt = Checkpointer(get_cfg(), Model(relation=False), save_dir='')
    with pytest.raises(WeightsLoadError, match=r'^MODEL.WEIGHT catalog://ImageNetPretrained/FAIR/'
                                               r'20171220/X-101-32x8d is a maskrcnn-benchmark '
                                               r'model-zoo name .*\(https://dl.fbaipublicfiles'
                                               r'.com/detectron/ImageNetPretrained/20171220/'
                                               r'X-101-32x8d.pkl\); this recipe downloads '
                                               r'nothing'):
        ckpt.load('catalog://ImageNetPretrained/FAIR/20171220/X-101-32x8d', with_optim=False,
                  what='MODEL.WEIGHT')
    with pytest.raises(WeightsLoadError, match=r'MODEL.PRETRAINED_DETECTOR_CKPT https://x/y.pth '
                                               r'is a URL'):
        ckpt.load('https://x/y.pth', with_optim=False, what='MODEL.PRETRAINED_DETECTOR_CKPT')


def test_resume_from_a_file_of_a_bigger_model_is_refused(tmp_path):
    # a relation checkpoint named in last_checkpoint of a detector run: every detector key
    # is there, the relation head is not the detector's
    det = Model(relation=False)
    ckpt = Checkpointer(get_cfg(), Model(relation=True), save_dir=str(tmp_path))
    ckpt.save('model_0000002', iteration=2)
    with pytest.raises(WeightsLoadError, match=r'^resume checkpoint .*: loaded 2 of 2 tensors '
                                               r'\(0 missing, 4 unexpected.*unexpected '
                                               r'roi_heads.relation'):
        Checkpointer(get_cfg(), det, save_dir=str(tmp_path)).load()


def test_scheduler_of_another_schedule_is_refused_before_loading(tmp_path):
    _, _, _, ckpt = _setup(tmp_path)
    path = ckpt.save('model_0000002', iteration=2)
    saved = torch.load(path, weights_only=True)
    saved['scheduler'] = {'last_epoch': 2, 'base_lrs': [0.1] * 3}   # no milestones / gamma
    torch.save(saved, path)
    model2, _, sched2, ckpt2 = _setup(tmp_path)
    before = {k: v.clone() for k, v in model2.state_dict().items()}
    with pytest.raises(WeightsLoadError, match=r'its scheduler state is of another schedule '
                                               r'\(no gamma, milestones.*SOLVER.RESTORE_'
                                               r'SCHEDULER False'):
        ckpt2.load()
    assert _same(model2, before) and sched2.last_epoch == 0
