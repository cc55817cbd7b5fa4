"""Scene-Graph-Benchmark's own checkpoint layout through the scene-graph Checkpointer, with
real (tiny) scene-graph models: ``{"model", "optimizer", "scheduler", "iteration"}``,
``module.`` keys from DDP, no gluontrain entry, for a detector and a relation model (resume
with a full report; SGB's optimizer state honoured when it fits, refused in one line when it
does not); detector files into the relation model (the frozen detector must be filled);
Detectron Caffe2 ``.pkl`` bodies as ``MODEL.WEIGHT``.

SGB's layout is built by hand here (a plain dict: the layout is a fact of its
``Checkpointer.save``); and a file written by SGB's own ``DetectronCheckpointer`` (its own
``WarmupMultiStepLR`` giving the scheduler state) resumes: from the recording
``sgb_checkpointer`` (the file's bytes) and, with ``GLUONTRAIN_REFERENCES`` set, live. SGB's
checkpointer reading a file of ours is live only (test_sgb_checkpointer_reads_our_file).
"""
import contextlib
import io
import json
import logging
import os
import pickle
import sys
import tempfile
import types
import warnings
from collections import OrderedDict

import numpy as np
import pytest
import torch

from fixtures.recorded import SOURCES, Recorder, reference_source, source_module
from gluontrain.core.load_report import WeightsLoadError
from gluontrain.torch.sgg.checkpoint import (FIX_DETECTOR_CKPT, FIX_WEIGHT, LAST_CHECKPOINT,
                                             Checkpointer)
from gluontrain.torch.sgg.model import build_relation_model, eval_modules, fix_eval_modules
from gluontrain.torch.sgg.modeling import build_detector
from gluontrain.torch.sgg.modeling.load_mapping import RELATION_LOAD_MAPPING
from gluontrain.torch.sgg.solver import WarmupMultiStepLR, make_optimizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'modeling'))
# pylint: disable-next=wrong-import-position
from sgg_model_helpers import make_batch, tiny_cfg  # noqa: E402

C2_NAMES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures',
                        'c2', 'c2_names_R-50-FPN.json')


def _same(model, state):
    return all(torch.equal(v, state[k]) for k, v in model.state_dict().items())


def _listen(caplog):
    logger = logging.getLogger('sgg-checkpoint-sgb-test')
    logger.setLevel(logging.INFO)
    logger.addHandler(caplog.handler)
    return logger


# ---------------------------------------------------------------------------------------
# Scene-Graph-Benchmark's own checkpoint layout, with real (tiny) scene-graph models

def _train_one_step(model, optimizer):
    """One SGD step, so that the optimizer holds momentum buffers."""
    images, targets = make_batch()
    model.train()
    losses = model(images, targets)
    optimizer.zero_grad()
    sum(losses.values()).backward()
    optimizer.step()


def _models(relation):
    cfg = tiny_cfg('predcls', relation_on=relation)
    if relation:
        cfg.MODEL.ROI_RELATION_HEAD.PREDICTOR = 'IMPPredictor'
        cfg.MODEL.ROI_RELATION_HEAD.CONTEXT_HIDDEN_DIM = 32
        model = build_relation_model(cfg)
        fix_eval_modules(eval_modules(model))
    else:
        model = build_detector(cfg)
    # SGB's optimizer: one group per trainable parameter, in named_parameters() order
    optimizer = make_optimizer(cfg, model, slow_heads=[], rl_factor=2.0)
    return cfg, model, optimizer


def sgb_layout(model, optimizer, iteration, scheduler=None):
    """What SGB's ``Checkpointer.save`` writes for a DDP-wrapped model: ``model`` with
    ``module.`` keys, ``optimizer``, ``scheduler`` (the detector tool only: relation_train_net
    builds its checkpointer with ``custom_scheduler=True``) and the ``arguments``
    (``iteration``); no gluontrain entry."""
    data = {'model': OrderedDict(('module.' + k, v) for k, v in model.state_dict().items()),
            'optimizer': optimizer.state_dict()}
    if scheduler is not None:
        data['scheduler'] = scheduler
    data['iteration'] = iteration
    return data


def _sgb_multistep_state(optimizer, last_epoch):
    """The ``state_dict`` of SGB's ``WarmupMultiStepLR`` (a torch ``_LRScheduler``): its
    ``__dict__`` minus the optimizer, torch's bookkeeping included."""
    base = [g['initial_lr'] if 'initial_lr' in g else g['lr'] for g in optimizer.param_groups]
    return {'milestones': (30000, 45000), 'gamma': 0.1, 'warmup_factor': 0.1,
            'warmup_iters': 500, 'warmup_method': 'linear', 'base_lrs': base,
            'last_epoch': last_epoch, 'verbose': False, '_step_count': last_epoch + 1,
            '_get_lr_called_within_step': False, '_last_lr': list(base)}


@pytest.mark.parametrize('relation', [False, True], ids=['detector', 'relation'])
def test_sgb_checkpoint_resumes_with_a_full_report(tmp_path, caplog, relation):
    torch.manual_seed(0)
    cfg, model, optimizer = _models(relation)
    _train_one_step(model, optimizer)
    sched = None if relation else _sgb_multistep_state(optimizer, 7)
    out = tmp_path / 'out'
    out.mkdir()
    torch.save(sgb_layout(model, optimizer, 7, sched), str(out / 'model_0000007.pth'))
    # SGB writes OUTPUT_DIR/name.pth into last_checkpoint
    (out / LAST_CHECKPOINT).write_text(str(out / 'model_0000007.pth'))
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    momentum = [optimizer.state[p]['momentum_buffer'].clone()
                for g in optimizer.param_groups for p in g['params']
                if 'momentum_buffer' in optimizer.state[p]]

    torch.manual_seed(1)
    _, model2, optimizer2 = _models(relation)
    scheduler2 = WarmupMultiStepLR(optimizer2, (4,), warmup_iters=2)
    ckpt = Checkpointer(cfg, model2, optimizer2, scheduler2, str(out), logger=_listen(caplog))
    extra = ckpt.load(cfg.MODEL.PRETRAINED_DETECTOR_CKPT)
    assert extra['iteration'] == 7 and extra['hooks'] == {}
    assert _same(model2, expected)
    report = ckpt.last_report
    assert report.loaded and len(report.loaded) == report.total
    assert not report.missing and not report.unexpected and not report.mismatched
    assert 'loaded {} of {} tensors from {}'.format(report.total, report.total,
                                                    out / 'model_0000007.pth') in caplog.text
    got = [optimizer2.state[p]['momentum_buffer'] for g in optimizer2.param_groups
           for p in g['params'] if 'momentum_buffer' in optimizer2.state[p]]
    assert len(got) == len(momentum) > 0
    assert all(torch.equal(a, b) for a, b in zip(got, momentum))
    assert 'holds no gluontrain state' in caplog.text
    if relation:   # SGB's relation files hold no scheduler: the schedule restarts (SGB)
        assert scheduler2.last_epoch == 0 and 'holds no scheduler state' in caplog.text
    else:          # torch's _LRScheduler bookkeeping is dropped, the schedule kept
        assert scheduler2.last_epoch == 7 and scheduler2.milestones == (30000, 45000)
        assert not hasattr(scheduler2, '_step_count')
        assert [g['lr'] for g in optimizer2.param_groups] == scheduler2.get_last_lr()


def test_sgb_optimizer_of_another_model_is_refused_before_loading(tmp_path):
    torch.manual_seed(0)
    cfg, rel, rel_opt = _models(True)
    _, det, det_opt = _models(False)   # every parameter trainable: other groups
    out = tmp_path / 'out'
    out.mkdir()
    data = sgb_layout(rel, det_opt, 5)
    torch.save(data, str(out / 'model_0000005.pth'))
    (out / LAST_CHECKPOINT).write_text('model_0000005.pth')
    torch.manual_seed(1)
    _, rel2, rel_opt2 = _models(True)
    before = {k: v.clone() for k, v in rel2.state_dict().items()}
    ckpt = Checkpointer(cfg, rel2, rel_opt2, None, str(out))
    with pytest.raises(WeightsLoadError, match=r"optimizer state does not fit this model's "
                                               r"optimizer \(\d+ parameter groups in the file, "
                                               r"\d+ here"):
        ckpt.load()
    assert _same(rel2, before)
    # same number of groups, buffers of other shapes (another parameter order)
    _train_one_step(rel, rel_opt)
    state = rel_opt.state_dict()
    order = sorted(state['state'])
    state['state'] = {a: state['state'][b] for a, b in zip(order, order[1:] + order[:1])}
    data = sgb_layout(rel, rel_opt, 5)
    data['optimizer'] = state
    torch.save(data, str(out / 'model_0000005.pth'))
    with pytest.raises(WeightsLoadError, match='momentum_buffer .* the parameters are in '
                                               'another order'):
        ckpt.load()


def test_detector_checkpoint_into_relation_model_requires_the_detector(tmp_path, caplog):
    torch.manual_seed(0)
    cfg, det, _ = _models(False)
    body = {k[len('backbone.body.'):]: v for k, v in det.state_dict().items()
            if k.startswith('backbone.body.')}
    torch.save(body, str(tmp_path / 'body.pth'))   # an ImageNet-like backbone file
    _, rel, _ = _models(True)
    ckpt = Checkpointer(cfg, rel, save_dir=str(tmp_path / 'out'), logger=_listen(caplog))
    with pytest.raises(WeightsLoadError, match=r'MODEL.PRETRAINED_DETECTOR_CKPT .*body.pth: '
                                               r'loaded \d+ of \d+ tensors but none of the \d+ '
                                               r'of roi_heads.box'):
        ckpt.load(str(tmp_path / 'body.pth'), with_optim=False, what='MODEL.PRETRAINED_'
                  'DETECTOR_CKPT', fix=FIX_DETECTOR_CKPT, load_mapping=RELATION_LOAD_MAPPING,
                  required=('backbone', 'roi_heads.box'))
    # the same file is a fine MODEL.WEIGHT for the detector stage: partial, reported
    _, det2, _ = _models(False)
    ckpt = Checkpointer(cfg, det2, save_dir=str(tmp_path / 'out'), logger=_listen(caplog))
    ckpt.load(str(tmp_path / 'body.pth'), with_optim=False, what='MODEL.WEIGHT', fix=FIX_WEIGHT)
    n_body = sum(1 for k in body if not k.endswith('num_batches_tracked'))
    assert len([k for k in ckpt.last_report.loaded if k.startswith('backbone.body.')]) \
        >= n_body
    assert 'backbone.body.* <- * (' in caplog.text and ', by suffix)' in caplog.text
    for k, v in body.items():
        assert torch.equal(det2.state_dict()['backbone.body.' + k], v), k


def test_detectron_c2_body_pkl_as_model_weight(tmp_path, caplog):
    """A ``.pkl`` is a Detectron Caffe2 body (DetectronCheckpointer._load_file): converted
    (modeling.c2_loading), loaded into backbone.body by suffix, reported; the frozen norms'
    statistics no Caffe2 file holds are expected absent, not missing."""
    with open(C2_NAMES) as f:
        names = json.load(f)['mapping']      # {Caffe2 blob: body key}, a recorded fact
    cfg = tiny_cfg(relation_on=False)
    cfg.MODEL.BACKBONE.CONV_BODY, cfg.MODEL.BACKBONE.NORM = 'R-50-FPN', 'off'
    cfg.MODEL.BACKBONE.WIDTH_MULT = 0.0625
    torch.manual_seed(0)
    det = build_detector(cfg)
    own = det.state_dict()
    rng = np.random.RandomState(0)
    blobs = {n: rng.standard_normal(tuple(own['backbone.body.' + k].shape)).astype(np.float32)
             for n, k in names.items()}
    blobs['fc1000_w'] = np.zeros((10, 4), np.float32)
    with open(str(tmp_path / 'R-50.pkl'), 'wb') as f:
        pickle.dump({'blobs': blobs}, f, protocol=2)
    ckpt = Checkpointer(cfg, det, save_dir='', logger=_listen(caplog))
    ckpt.load(str(tmp_path / 'R-50.pkl'), with_optim=False, what='MODEL.WEIGHT', fix=FIX_WEIGHT)
    after = det.state_dict()
    for n, k in names.items():
        assert np.array_equal(after['backbone.body.' + k].numpy(), blobs[n]), k
    report = ckpt.last_report
    body = [k for k in own if k.startswith('backbone.body.')]
    stats = [k for k in body if k.endswith(('running_mean', 'running_var'))]
    anchors = [k for k in own if '.cell_anchors.' in k]   # recomputed from MODEL.RPN
    assert stats and sorted(report.ignored) == sorted(stats + anchors)
    assert sorted(k for k in report.loaded) == sorted('backbone.body.' + k
                                                      for k in names.values())
    assert not any(k.startswith('backbone.body.') for k in report.missing)
    assert 'converted {} of {} Caffe2 blobs'.format(len(names), len(blobs)) in caplog.text
    assert 'backbone.body.* <- * ({} tensors, by suffix)'.format(len(names)) in caplog.text


# ---------------------------------------------------------------------------------------
# Scene-Graph-Benchmark's own Checkpointer (recorded, and live from GLUONTRAIN_REFERENCES)

SGB_FILES = {'maskrcnn_benchmark.utils.model_serialization':
             'maskrcnn_benchmark/utils/model_serialization.py',
             'maskrcnn_benchmark.utils.checkpoint': 'maskrcnn_benchmark/utils/checkpoint.py',
             'maskrcnn_benchmark.solver.lr_scheduler': 'maskrcnn_benchmark/solver/lr_scheduler.py'}
#: Where SGB's ``last_checkpoint`` names the save folder, in the recording.
OUTPUT_DIR_MARK = '{OUTPUT_DIR}'


def _sgb():
    """SGB's ``utils/checkpoint.py`` (with its ``model_serialization``) and
    ``solver/lr_scheduler.py``, or None without them; the catalog / URL / Caffe2 helpers it
    imports are stubbed (unused for ``.pth`` files), as is ``utils/imports`` (``torch._six`` is
    gone). The ``maskrcnn_benchmark*`` entries its imports need are removed from
    ``sys.modules`` once loaded (other test modules never see them)."""
    sources = {name: reference_source('Scene-Graph-Benchmark.pytorch', path)
               for name, path in SGB_FILES.items()}
    if not all(sources.values()):
        return None
    stubs = {}
    for name in ('maskrcnn_benchmark', 'maskrcnn_benchmark.utils', 'maskrcnn_benchmark.solver'):
        stubs[name] = types.ModuleType(name)
        stubs[name].__path__ = []
    for name, attr in (('imports', 'import_file'), ('c2_model_loading', 'load_c2_format'),
                       ('model_zoo', 'cache_url')):
        stubs['maskrcnn_benchmark.utils.' + name] = types.ModuleType(
            'maskrcnn_benchmark.utils.' + name)
        setattr(stubs['maskrcnn_benchmark.utils.' + name], attr, None)
    names = list(stubs) + list(SGB_FILES)
    saved = {name: sys.modules[name] for name in names if name in sys.modules}
    sys.modules.update(stubs)
    mods = {}
    try:
        for name, src in sources.items():
            mods[name.rsplit('.', 1)[-1]] = sys.modules[name] = source_module(name, src)
    finally:
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
    return types.SimpleNamespace(**mods)


SGB = Recorder('sgb_checkpointer', _sgb, "SGB's utils/checkpoint.py and solver/lr_scheduler.py")
KINDS = ['detector', 'relation']


def _sgb_save(sgb, relation, out):
    """Train the tiny model one step (seed 0), step SGB's WarmupMultiStepLR 6 times and let
    SGB's DetectronCheckpointer save it, DDP-like, as ``out/model_0000006.pth``; returns SGB's
    scheduler and the trained optimizer."""
    torch.manual_seed(0)
    cfg, model, optimizer = _models(relation)
    _train_one_step(model, optimizer)
    # detector_pretrain_net: WarmupMultiStepLR saved; relation_train_net: custom_scheduler
    scheduler = sgb.lr_scheduler.WarmupMultiStepLR(optimizer, (3, 5), 0.1, warmup_factor=0.1,
                                                   warmup_iters=4)
    with warnings.catch_warnings():   # torch's "scheduler.step() before optimizer.step()"
        warnings.simplefilter('ignore', UserWarning)
        for _ in range(6):
            scheduler.step()
    ddp = torch.nn.DataParallel(model)     # keys with 'module.', as SGB's DDP model saves
    writer = sgb.checkpoint.DetectronCheckpointer(cfg, ddp, optimizer, scheduler, str(out),
                                                  save_to_disk=True, custom_scheduler=relation)
    with contextlib.redirect_stdout(io.StringIO()):   # SGB's prints
        writer.save('model_0000006', iteration=6)
    return scheduler, optimizer


def skeleton(value):
    """``value`` (a loaded checkpoint) as JSON-able data: every container and key with its
    type (dict, OrderedDict with its ``_metadata``, list, tuple), every number / text as is,
    every tensor as ``{"tensor": [shape, dtype]}`` (its values are the model's and the
    optimizer's, rebuilt by :func:`rebuild`)."""
    if isinstance(value, torch.Tensor):
        return {'tensor': [list(value.shape), str(value.dtype)]}
    if isinstance(value, dict):
        out = {'odict' if isinstance(value, OrderedDict) else 'dict':
               [[skeleton(k), skeleton(v)] for k, v in value.items()]}
        if getattr(value, '_metadata', None) is not None:
            out['meta'] = skeleton(value._metadata)  # pylint: disable=protected-access
        return out
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [skeleton(v) for v in value]}
    assert value is None or isinstance(value, (bool, int, float, str)), type(value)
    return {'value': value}


def rebuild(tree, tensor, path=()):
    """The object of a :func:`skeleton`, ``tensor(path, shape, dtype)`` giving each tensor."""
    (kind, content), = ((k, v) for k, v in tree.items() if k != 'meta')
    if kind == 'tensor':
        return tensor(path, tuple(content[0]), content[1])
    if kind == 'value':
        return content
    if kind in ('list', 'tuple'):
        items = [rebuild(v, tensor, path + (i,)) for i, v in enumerate(content)]
        return items if kind == 'list' else tuple(items)
    out = (OrderedDict if kind == 'odict' else dict)()
    for k, v in content:
        key = rebuild(k, tensor)
        out[key] = rebuild(v, tensor, path + (key,))
    if 'meta' in tree:
        out._metadata = rebuild(tree['meta'], tensor)  # pylint: disable=protected-access
    return out


@SGB.case(params=KINDS)
def sgb_checkpoint(sgb, kind):
    """What SGB's DetectronCheckpointer writes (:func:`_sgb_save`): the file's
    :func:`skeleton` as UTF-8 JSON (its tensors are the trained model's and optimizer's: only
    their shapes and dtypes are recorded, which keeps the recording small; the test fills them
    from the same seeded training), its ``last_checkpoint`` (the save folder as
    ``{OUTPUT_DIR}``), and SGB's scheduler after its 6 steps: ``last_epoch``, ``get_last_lr()``
    and the optimizer's rates."""
    with tempfile.TemporaryDirectory() as out:
        scheduler, optimizer = _sgb_save(sgb, kind == 'relation', out)
        data = torch.load(os.path.join(out, 'model_0000006.pth'), weights_only=True)
        with open(os.path.join(out, LAST_CHECKPOINT)) as f:
            last = f.read().replace(out, OUTPUT_DIR_MARK)
    # UTF-8 bytes, not json_array's 4-byte characters: a quarter of the size
    tree = json.dumps(skeleton(data), sort_keys=True, separators=(',', ':')).encode()
    return {'skeleton': np.frombuffer(tree, np.uint8), 'last_checkpoint': last,
            'last_epoch': scheduler.last_epoch, 'last_lr': scheduler.get_last_lr(),
            'lrs': [g['lr'] for g in optimizer.param_groups]}


def _sgb_file(ref, relation, out):
    """SGB's file from the case's record, into ``out``: its skeleton with the tensors of the
    same seeded, trained model and optimizer :func:`_sgb_save` gave SGB; returns them."""
    torch.manual_seed(0)
    _, model, optimizer = _models(relation)
    _train_one_step(model, optimizer)
    local = {'model': {'module.' + k: v for k, v in model.state_dict().items()},
             'optimizer': optimizer.state_dict()}

    def tensor(path, shape, dtype):
        value = local
        for key in path:
            value = value[key]
        assert (tuple(value.shape), str(value.dtype)) == (shape, dtype), path
        return value
    data = rebuild(json.loads(ref['skeleton'].tobytes().decode()), tensor)
    torch.save(data, str(out / 'model_0000006.pth'))
    (out / LAST_CHECKPOINT).write_text(str(ref['last_checkpoint']).replace(OUTPUT_DIR_MARK,
                                                                             str(out)))
    return model, optimizer


@pytest.mark.parametrize('source', SOURCES)
@pytest.mark.parametrize('relation', [False, True], ids=KINDS)
def test_file_written_by_sgb_checkpointer_resumes(tmp_path, caplog, relation, source):
    """A file as SGB's own DetectronCheckpointer writes it (its layout recorded, or written
    live) resumes through ours: every tensor, the momentum, SGB's schedule."""
    ref = SGB.outputs('sgb_checkpoint[%s]' % KINDS[relation], source)
    out = tmp_path / 'out'
    out.mkdir()
    model, optimizer = _sgb_file(ref, relation, out)
    raw = torch.load(str(out / 'model_0000006.pth'), weights_only=True)
    assert set(raw) == ({'model', 'optimizer', 'iteration'} | (set() if relation
                                                                 else {'scheduler'}))
    assert all(k.startswith('module.') for k in raw['model'])
    expected = {k: v.clone() for k, v in model.state_dict().items()}

    torch.manual_seed(1)
    cfg, model2, optimizer2 = _models(relation)
    scheduler2 = WarmupMultiStepLR(optimizer2, (3, 5), 0.1, warmup_factor=0.1, warmup_iters=4)
    ckpt = Checkpointer(cfg, model2, optimizer2, scheduler2, str(out), logger=_listen(caplog))
    extra = ckpt.load()                    # SGB's last_checkpoint names OUTPUT_DIR/name.pth
    assert extra['iteration'] == 6 and _same(model2, expected)
    report = ckpt.last_report
    assert len(report.loaded) == report.total and not report.unexpected
    pairs = [(optimizer.state[p1].get('momentum_buffer'),
              optimizer2.state[p2].get('momentum_buffer'))
             for g1, g2 in zip(optimizer.param_groups, optimizer2.param_groups)
             for p1, p2 in zip(g1['params'], g2['params'])]
    assert any(a is not None for a, _ in pairs)
    assert all((a is None and b is None) or torch.equal(a, b) for a, b in pairs)
    if relation:
        assert scheduler2.last_epoch == 0          # SGB's relation files: no scheduler
    else:                                          # SGB's schedule, at SGB's rates
        assert scheduler2.last_epoch == int(ref['last_epoch']) == 6
        assert scheduler2.get_last_lr() == pytest.approx(ref['last_lr'].tolist(), rel=1e-12)
        assert [g['lr'] for g in optimizer2.param_groups] == pytest.approx(
            ref['lrs'].tolist(), rel=1e-12)


@pytest.mark.live_reference
@pytest.mark.parametrize('relation', [False, True], ids=KINDS)
def test_sgb_checkpointer_reads_our_file(tmp_path, relation):
    """SGB's checkpointer reads a file of ours (strict load of the same model). Live only: the
    input is our own file, so a recording of SGB's reading would freeze our current output
    instead of checking it; and what SGB's ``load`` does with it (``model_serialization``'s
    suffix matching) is SGB's code, not a value to record."""
    sgb = SGB.live()
    torch.manual_seed(0)
    cfg, model, optimizer = _models(relation)
    _train_one_step(model, optimizer)
    scheduler = WarmupMultiStepLR(optimizer, (3, 5), 0.1, warmup_factor=0.1, warmup_iters=4)
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    ours = Checkpointer(cfg, model, optimizer, scheduler, str(tmp_path / 'ours'))
    path = ours.save('model_final', iteration=6)
    torch.manual_seed(2)
    _, model3, _ = _models(relation)
    reader = sgb.checkpoint.DetectronCheckpointer(cfg, model3, save_dir='')
    with contextlib.redirect_stdout(io.StringIO()):   # SGB's prints
        rest = reader.load(path, with_optim=False)
    assert rest['iteration'] == 6 and _same(model3, expected)


def test_c2_body_of_another_group_count_is_refused(tmp_path):
    """A ResNeXt .pkl under a plain ResNet config: the group count, read off the file's
    shapes, is named with the keys to set."""
    with open(C2_NAMES) as f:
        names = json.load(f)['mapping']
    cfg = tiny_cfg(relation_on=False)
    cfg.MODEL.BACKBONE.CONV_BODY, cfg.MODEL.BACKBONE.NORM = 'R-50-FPN', 'off'
    cfg.MODEL.BACKBONE.WIDTH_MULT = 0.0625
    det = build_detector(cfg)
    own = det.state_dict()
    blobs = {}
    for n, k in names.items():
        shape = list(own['backbone.body.' + k].shape)
        if k.endswith('conv2.weight'):
            shape[1] = max(1, shape[1] // 4)     # grouped 3x3: in-channels / groups
        blobs[n] = np.zeros(shape, np.float32)
    with open(str(tmp_path / 'X.pkl'), 'wb') as f:
        pickle.dump({'blobs': blobs}, f, protocol=2)
    before = {k: v.clone() for k, v in own.items()}
    with pytest.raises(WeightsLoadError, match=r'MODEL.WEIGHT .*X.pkl is a body with 4 groups '
                                               r'in its 3x3 convolutions \(a ResNeXt\) but '
                                               r'MODEL.RESNETS.NUM_GROUPS is 1'):
        Checkpointer(cfg, det, save_dir='').load(str(tmp_path / 'X.pkl'), with_optim=False,
                                                 what='MODEL.WEIGHT', fix=FIX_WEIGHT)
    assert _same(det, before)
