"""seamseg's snapshot layout, resume and pre-train loading, with reports of what loaded.

The comparison with seamseg's own snapshot code runs against the recording
``seamseg_snapshot`` and, with ``GLUONTRAIN_REFERENCES`` set, live (seamseg_snapshot_worker.py
in a process of its own)."""
import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from fixtures.recorded import SOURCES, Recorder, references_dir
from gluontrain.core.load_report import WeightsLoadError
from gluontrain.torch.frcnn import snapshot as S
from gluontrain.torch.frcnn.config import load_config
from gluontrain.torch.frcnn.meters import AverageMeter
from gluontrain.torch.frcnn.model import make_model

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'fixtures'))
from reference_fill import load_key_list  # noqa: E402  pylint: disable=wrong-import-position
# pylint: disable-next=wrong-import-position
from seamseg_snapshot_worker import rebuild  # noqa: E402

# seamseg's DetectionNet from its scripts/train_detection.py make_model (default detection.ini,
# 80 things), recorded by tests/fixtures/make_reference_fixtures.py
SEAMSEG_KEYS = 'seamseg_detection_R-50-FPN'


class _Net(torch.nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.body = torch.nn.Linear(2, 2)
        self.rpn_head = torch.nn.Linear(2, 3)
        # a shared layer and a classifier, as seamseg's roi head (fc + roi_cls)
        self.roi_head = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, n))


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def records():
    handler, logger = _Records(), logging.getLogger('gluontrain.frcnn')
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.messages
    logger.removeHandler(handler)
    logger.setLevel(level)


def _save(path, net, epoch=4):
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    meters = {k + '_meter': AverageMeter((), .9).state_dict() for k in S.METERS}
    S.save_snapshot(str(path), load_config(None), epoch, 0, 0.25, 120,
                    body=net.body.state_dict(), rpn_head=net.rpn_head.state_dict(),
                    roi_head=net.roi_head.state_dict(), optimizer=opt.state_dict(), **meters)


def test_layout_and_resume(tmp_path):
    path = tmp_path / S.LAST
    src = _Net()
    _save(path, src)
    data = S.load_snapshot(str(path))
    assert set(data) == {'config', 'state_dict', 'training_meta'}
    assert set(data['state_dict']) == {'body', 'rpn_head', 'roi_head', 'optimizer',
                                       'loss_meter', 'obj_loss_meter', 'bbx_loss_meter',
                                       'roi_cls_loss_meter', 'roi_bbx_loss_meter'}
    assert data['training_meta'] == {'epoch': 4, 'last_score': 0, 'best_score': 0.25,
                                     'global_step': 120}
    assert '[body]' in data['config'] and 'resnet50' in data['config']
    dst = _Net()
    S.resume_from_snapshot(dst, str(path))
    assert torch.equal(dst.roi_head[1].weight, src.roi_head[1].weight)
    assert not list(tmp_path.glob('.*tmp'))  # staged write left nothing behind


def test_pre_train_module_prefix_and_shape_mismatch(tmp_path, records):
    path = tmp_path / 'a.pth.tar'
    src = _Net(n=5)
    _save(path, src)
    dst = _Net(n=3)
    before = dst.roi_head[1].weight.clone()
    reports = dict(S.pre_train_from_snapshots(dst, [str(path)]))
    assert torch.equal(dst.body.weight, src.body.weight)
    assert torch.equal(dst.roi_head[0].weight, src.roi_head[0].weight)
    assert torch.equal(dst.roi_head[1].weight, before)  # 5 vs 3 classes: dropped, as seamseg
    # ... but said: 2 of 4 roi_head tensors, the classifier's named with both shapes
    roi = reports['roi_head']
    assert (len(roi.loaded), roi.total, roi.missing, roi.unexpected) == (2, 4, [], [])
    assert roi.mismatched == [('1.weight', (3, 2), (5, 2)), ('1.bias', (3,), (5,))]
    source = '{} [roi_head]'.format(path)
    assert records == [
        'loaded 2 of 2 tensors from {} [body] (0 missing, 0 unexpected, 0 wrong shape)'.format(
            path),
        'loaded 2 of 2 tensors from {} [rpn_head] (0 missing, 0 unexpected, 0 wrong '
        'shape)'.format(path),
        'loaded 2 of 4 tensors from {} (0 missing, 0 unexpected, 2 wrong shape)\n'
        "Skip loading parameter '1.weight' to the model due to incompatible shapes: (5, 2) in "
        'the checkpoint but (3, 2) in the model!\n'
        "Skip loading parameter '1.bias' to the model due to incompatible shapes: (5,) in the "
        'checkpoint but (3,) in the model!'.format(source)]
    other = _Net()
    assert [m for m, _ in S.pre_train_from_snapshots(other, ['rpn_head:' + str(path)])] == [
        'rpn_head']
    assert torch.equal(other.rpn_head.weight, src.rpn_head.weight)
    assert not torch.equal(other.body.weight, src.body.weight)
    with pytest.raises(ValueError, match='Unrecognized network module'):
        S.pre_train_from_snapshots(other, ['neck:' + str(path)])


def _renamed_snapshot(path, net, modules=S.MODULES):
    """A snapshot of ``net`` whose ``modules`` have every key renamed."""
    states = {m: getattr(net, m).state_dict() for m in S.MODULES}
    for m in modules:
        states[m] = {'renamed.' + k: v for k, v in states[m].items()}
    S.save_snapshot(str(path), load_config(None), 0, 0, 0, 0, **states)


def test_resume_refuses_what_does_not_fit_before_loading(tmp_path, records):
    renamed = tmp_path / 'renamed.pth.tar'
    _renamed_snapshot(renamed, _Net(), modules=('roi_head',))
    dst = _Net()
    before = dst.body.weight.detach().clone()
    with pytest.raises(WeightsLoadError) as info:
        S.resume_from_snapshot(dst, str(renamed))
    assert str(info.value) == (
        "--resume {} [roi_head]: loaded 0 of 4 tensors; none of its keys (renamed.0.{{bias, "
        "weight}}, renamed.1.{{bias, weight}}) is a key of the model (0.{{bias, weight}}, "
        "1.{{bias, weight}}); {}".format(renamed, S.SNAPSHOT_FIX))
    # body and rpn_head fit, but nothing was loaded nor reported before the refusal
    assert torch.equal(dst.body.weight, before) and records == []
    # a resume must fill everything: another number of classes is refused (seamseg would
    # silently keep the model's random classifier)
    other = tmp_path / 'five.pth.tar'
    _save(other, _Net(n=5))
    with pytest.raises(WeightsLoadError, match=r"\[roi_head\]: loaded 2 of 4 tensors \(0 "
                                               r"missing, 0 unexpected, 2 wrong shape\); wrong "
                                               r"shape '1.weight' \(\(5, 2\) in the file, "
                                               r"\(3, 2\) in the model\) and 1 more; pass"):
        S.resume_from_snapshot(_Net(n=3), str(other))
    with pytest.raises(WeightsLoadError, match=r'^--pre_train .*renamed.pth.tar \[roi_head\]: '
                                               r'loaded 0 of 4 tensors'):
        S.pre_train_from_snapshots(_Net(), [str(renamed)])


def test_resume_logs_every_module(tmp_path, records):
    path = tmp_path / S.LAST
    _save(path, _Net())
    data = S.resume_from_snapshot(_Net(), str(path))
    assert {m: (len(r.loaded), r.total) for m, r in data['load_reports'].items()} == {
        'body': (2, 2), 'rpn_head': (2, 2), 'roi_head': (4, 4)}
    assert records == ['loaded {} of {} tensors from {} [{}] (0 missing, 0 unexpected, 0 '
                       'wrong shape)'.format(n, n, path, m)
                       for m, n in (('body', 2), ('rpn_head', 2), ('roi_head', 4))]


def test_bad_snapshots(tmp_path):
    with pytest.raises(FileNotFoundError):
        S.load_snapshot(str(tmp_path / 'none.pth.tar'))
    torch.save([1, 2], tmp_path / 'list.pth')
    with pytest.raises(ValueError, match='not a seamseg snapshot'):
        S.load_snapshot(str(tmp_path / 'list.pth'))
    torch.save({'state_dict': {'body': {}}}, tmp_path / 'part.pth')
    with pytest.raises(KeyError, match='rpn_head') as info:
        S.resume_from_snapshot(_Net(), str(tmp_path / 'part.pth'))
    # seamseg's KeyError, and a one-line error of the command line
    assert isinstance(info.value, WeightsLoadError) and str(info.value).startswith(
        "--resume {}: the given snapshot does not contain a state_dict for module 'rpn_head' "
        "(it has body); pass".format(tmp_path / 'part.pth'))
    # a plain state_dict of another recipe is named
    torch.save({'vgg.0.weight': torch.zeros(1), 'loc.0.weight': torch.zeros(1)},
               tmp_path / 'ssd.pth')
    with pytest.raises(WeightsLoadError, match=r'ssd.pth is not a seamseg snapshot \(it looks '
                                               r'like an ssd.pytorch SSD300 state_dict\)'):
        S.resume_from_snapshot(_Net(), str(tmp_path / 'ssd.pth'))
    (tmp_path / 'empty.pth.tar').write_bytes(b'')
    with pytest.raises(WeightsLoadError, match=r'^--pre_train .*empty.pth.tar is empty'):
        S.pre_train_from_snapshots(_Net(), [str(tmp_path / 'empty.pth.tar')])
    torch.save({'state_dict': {'optimizer': {}}}, tmp_path / 'opt.pth')
    with pytest.raises(WeightsLoadError, match=r'holds no state_dict for body, rpn_head, '
                                               r'roi_head \(it has optimizer\)'):
        S.pre_train_from_snapshots(_Net(), [str(tmp_path / 'opt.pth')])


def _module_shapes(model):
    return {'{}.{}'.format(m, k): tuple(v.shape)
            for m in S.MODULES for k, v in getattr(model, m).state_dict().items()}


def _seamseg_layout(keys, drop=()):
    """A snapshot ``state_dict`` laid out as the recorded seamseg model's: one tensor per
    key, of its shape and dtype (a broadcast scalar: cheap to write)."""
    state = {m: {} for m in S.MODULES}
    for key, shape, dtype in keys:
        module, name = key.split('.', 1)
        if not name.endswith(drop):
            state[module][name] = torch.zeros((), dtype=getattr(torch, dtype)).expand(shape)
    return state


@pytest.fixture(scope='module')
def default_model():
    """Our detector from the shipped defaults.ini, 80 things (the recorded model's setting)."""
    return make_model(load_config(None), 80, 0)


def test_keys_and_shapes_are_seamseg_s(default_model):
    recorded = load_key_list(SEAMSEG_KEYS)
    assert recorded['opts'] == {'num_thing': 80, 'num_stuff': 0}
    # the same names (body.backbone.mod1.conv1.weight ...), shapes and order, key for key
    assert list(_module_shapes(default_model).items()) == list(recorded['shapes'].items())


@pytest.mark.parametrize('drop', [(), ('num_batches_tracked',)])
def test_seamseg_snapshot_loads_every_tensor(tmp_path, default_model, records, drop):
    """A snapshot in seamseg's layout (``drop``: inplace_abn 1.0's, without
    num_batches_tracked) resumes every module completely."""
    recorded = load_key_list(SEAMSEG_KEYS)
    path = tmp_path / 'seamseg.pth.tar'
    S.save_snapshot(str(path), load_config(None), 2, 0.1, 0.2, 30,
                    **_seamseg_layout(recorded['keys'], drop))
    data = S.resume_from_snapshot(default_model, str(path))
    counts = {m: (len(r.loaded), r.total, len(r.missing), len(r.unexpected), len(r.mismatched),
                  len(r.ignored)) for m, r in data['load_reports'].items()}
    per_module = {m: sum(1 for k in recorded['shapes'] if k.startswith(m + '.'))
                  for m in S.MODULES}
    tracked = {m: sum(1 for k in recorded['shapes'] if k.startswith(m + '.')
                      and k.endswith('num_batches_tracked')) for m in S.MODULES}
    assert per_module == {'body': 366, 'rpn_head': 10, 'roi_head': 16}
    for m in S.MODULES:
        n = per_module[m] - (tracked[m] if drop else 0)
        assert counts[m] == (n, n, 0, 0, 0, tracked[m] if drop else 0), m
    assert all(r.startswith('loaded ') for r in records) and len(records) == 3
    assert torch.count_nonzero(default_model.roi_head.roi_cls.weight) == 0  # the file's zeros


def _seamseg_worker():
    """Path of ``seamseg_snapshot_worker.py`` when seamseg and inplace_abn are under
    ``$GLUONTRAIN_REFERENCES``, else None."""
    refs = references_dir()
    if refs is None or not all(os.path.isdir(os.path.join(refs, name))
                               for name in ('seamseg', 'inplace_abn')):
        return None
    return os.path.join(HERE, 'seamseg_snapshot_worker.py')


SEAMSEG = Recorder('seamseg_snapshot', _seamseg_worker,
                   "seamseg's utils/snapshot.py and scripts/train_detection.py")
#: seamseg's resume of our snapshot of the default model: every tensor lands, module by module.
EVERY_TENSOR_LANDS = {m: {'equal': n, 'total': n, 'not_in_file': [], 'not_in_model': []}
                      for m, n in (('body', 366), ('rpn_head', 10), ('roi_head', 16))}


def _run_worker(worker, *args):
    """The JSON line ``seamseg_snapshot_worker.py`` prints."""
    out = subprocess.run([sys.executable, worker] + list(args), capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _utf8(obj):
    """``obj`` as UTF-8 JSON bytes (a quarter of ``json_array``'s 4-byte characters)."""
    return np.frombuffer(json.dumps(obj, sort_keys=True, separators=(',', ':')).encode(),
                         np.uint8)


@SEAMSEG.case
def snapshot_code(worker):
    """seamseg's side (:mod:`seamseg_snapshot_worker` without a snapshot to resume): its
    model's ``(key, shape, dtype)`` per module, what its ``resume_from_snapshot`` loads a
    snapshot into, and the :func:`~seamseg_snapshot_worker.skeleton` of the file its
    ``save_snapshot`` writes (marker-filled tensors)."""
    result = _run_worker(worker)
    return {'model': _utf8(result['model']), 'written': _utf8(result['written'])}


def _our_snapshot(path, model):
    """Our snapshot of ``model`` with every tensor set to ``-(1000 * (module + 1) + index)``."""
    with torch.no_grad():
        for m, name in enumerate(S.MODULES):
            for i, value in enumerate(getattr(model, name).state_dict().values()):
                value.fill_(-(1000 * (m + 1) + i))
    S.save_snapshot(str(path), load_config(None), 0, 0, 0, 0,
                    **{m: getattr(model, m).state_dict() for m in S.MODULES})


@pytest.mark.parametrize('source', SOURCES)
def test_seamseg_own_snapshot_code(tmp_path, default_model, source):
    """Our snapshot against what seamseg's own ``resume_from_snapshot`` loads (every tensor
    of its model is in the file, with its shape), and the file seamseg's own
    ``save_snapshot`` writes through ours (every tensor lands where it should); recorded,
    and live from seamseg's checkout.

    seamseg's ``_load_pretraining_dict`` loads, with ``strict=False``, each file tensor whose
    key is the model's and whose shape agrees (the value cast to the model's dtype): those are
    the ``equal`` ones here, as the live worker counts them after a real resume
    (test_seamseg_resume_reads_our_snapshot_live)."""
    ref = SEAMSEG.outputs('snapshot_code', source)
    seamseg_model = json.loads(ref['model'].tobytes().decode())
    ours = tmp_path / 'ours.pth.tar'
    _our_snapshot(ours, default_model)
    saved = torch.load(str(ours), map_location='cpu', weights_only=True)['state_dict']
    result = {}
    for name in S.MODULES:
        own = {key: tuple(shape) for key, shape, _ in seamseg_model[name]}
        theirs = saved[name]
        result[name] = {
            'equal': sum(1 for k, shape in own.items()
                         if k in theirs and tuple(theirs[k].shape) == shape),
            'total': len(own), 'not_in_file': sorted(set(own) - set(theirs)),
            'not_in_model': sorted(set(theirs) - set(own))}
    assert result == EVERY_TENSOR_LANDS

    theirs = tmp_path / 'theirs.pth.tar'
    # every tensor of seamseg's file is one value: a broadcast scalar is the same content
    torch.save(rebuild(json.loads(ref['written'].tobytes().decode()),
                       lambda path, shape, dtype, value: torch.full(
                           (), value, dtype=getattr(torch, dtype.split('.')[-1])).expand(shape)),
               str(theirs))
    data = S.resume_from_snapshot(default_model, str(theirs))
    assert data['training_meta'] == {'epoch': 3, 'last_score': 0.5, 'best_score': 0.5,
                                     'global_step': 42}
    for m, name in enumerate(S.MODULES):
        report = data['load_reports'][name]
        assert (report.total, report.missing, report.unexpected) == (
            len(report.loaded), [], [])
        for i, (key, value) in enumerate(getattr(default_model, name).state_dict().items()):
            assert value.flatten()[0].item() == 1000 * (m + 1) + i, (name, key)
            assert bool((value == value.flatten()[0]).all()), (name, key)


@pytest.mark.live_reference
def test_seamseg_resume_reads_our_snapshot_live(tmp_path, default_model):
    """Our snapshot through seamseg's own ``resume_from_snapshot``, run for real: every tensor
    lands. Live only: its input is our own file, which a recording would freeze; the recorded
    twin (test_seamseg_own_snapshot_code) checks the same counts against seamseg's recorded
    model keys and shapes."""
    worker = SEAMSEG.live()
    ours = tmp_path / 'ours.pth.tar'
    _our_snapshot(ours, default_model)
    assert _run_worker(worker, str(ours))['resume'] == EVERY_TENSOR_LANDS
