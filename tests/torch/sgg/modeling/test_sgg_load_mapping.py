"""SGB's checkpoint alignment: mapping, longest-suffix matching, the load and its report
(loaded N of M, the keys left unfilled grouped, one line per mapping), refusals; and the same
model state as SGB's own ``load_state_dict``, against the committed recording
(``tests/fixtures/recorded/sgb_load_mapping.npz``, everywhere) and live against SGB's source
when ``$GLUONTRAIN_REFERENCES`` has it."""
import hashlib
import logging
from collections import OrderedDict

import numpy as np
import pytest
import torch

from fixtures.recorded import SOURCES, Recorder, reference_source, source_module
from sgg_model_helpers import TinyPredictor, tiny_cfg
from gluontrain.core.load_report import WeightsLoadError
from gluontrain.torch.sgg.model import build_relation_model
from gluontrain.torch.sgg.modeling import build_detector
from gluontrain.torch.sgg.modeling.load_mapping import (RELATION_LOAD_MAPPING,
                                                        align_and_update_state_dicts,
                                                        load_state_dict_with_mapping,
                                                        mapping_lines, match_keys)
from gluontrain.torch.weights import strip_ddp_prefix


def _t(v):
    return torch.tensor([float(v)])


def test_mapping_and_longest_suffix():
    model = OrderedDict((k, _t(0)) for k in [
        'backbone.body.conv1.weight',
        'roi_heads.box.feature_extractor.fc6.weight',
        'roi_heads.relation.box_feature_extractor.fc6.weight',
        'roi_heads.relation.union_feature_extractor.feature_extractor.fc6.weight',
        'roi_heads.relation.union_feature_extractor.feature_extractor.pooler.'
        'reduce_channel.0.weight',
        'roi_heads.relation.predictor.rel.weight'])
    loaded = OrderedDict([('conv1.weight', _t(1)), ('body.conv1.weight', _t(2)),
                          ('roi_heads.box.feature_extractor.fc6.weight', _t(3)),
                          ('fc6.weight', _t(4))])
    matched = align_and_update_state_dicts(model, loaded, RELATION_LOAD_MAPPING)
    assert model['backbone.body.conv1.weight'].item() == 2  # the longer suffix wins
    assert model['roi_heads.box.feature_extractor.fc6.weight'].item() == 3
    # both relation extractors are mapped onto the box head's extractor
    assert model['roi_heads.relation.box_feature_extractor.fc6.weight'].item() == 3
    assert model['roi_heads.relation.union_feature_extractor.feature_extractor.fc6.weight'
                 ].item() == 3
    # no loaded key is a suffix of these: they keep their values
    assert model['roi_heads.relation.predictor.rel.weight'].item() == 0
    assert model['roi_heads.relation.union_feature_extractor.feature_extractor.pooler.'
                 'reduce_channel.0.weight'].item() == 0
    assert len(matched) == 4
    # without the mapping the relation extractors fall back to the short 'fc6.weight'
    model2 = OrderedDict([('roi_heads.relation.box_feature_extractor.fc6.weight', _t(0))])
    align_and_update_state_dicts(model2, loaded, {})
    assert model2['roi_heads.relation.box_feature_extractor.fc6.weight'].item() == 4


def test_strip_prefix_only_when_all_keys_have_it():
    # SGB's strip_prefix_if_present(state_dict, 'module.') is gluontrain's strip_ddp_prefix
    assert list(strip_ddp_prefix({'module.a': 1, 'module.b': 2})) == ['a', 'b']
    assert list(strip_ddp_prefix({'module.a': 1, 'b': 2})) == ['module.a', 'b']


def _det_and_relation(seed=0):
    torch.manual_seed(seed)
    det = build_detector(tiny_cfg(relation_on=False))
    cfg = tiny_cfg('predcls')
    model = build_relation_model(cfg, predictor=TinyPredictor(cfg, 32))
    return det, model


def _listen(caplog):
    log = logging.getLogger('sgg-load-mapping-test')
    log.setLevel(logging.INFO)
    log.addHandler(caplog.handler)
    return log


def test_detector_checkpoint_into_relation_model(caplog):
    det, model = _det_and_relation()
    ckpt = {'module.' + k: v for k, v in det.state_dict().items()}   # DDP-saved
    report = load_state_dict_with_mapping(model, ckpt, RELATION_LOAD_MAPPING, source='det.pth',
                                          what='MODEL.PRETRAINED_DETECTOR_CKPT', fix='FIX',
                                          log=_listen(caplog))
    fc6 = det.roi_heads['box'].feature_extractor.fc6.weight
    rel = model.roi_heads['relation']
    assert torch.equal(rel.box_feature_extractor.fc6.weight, fc6)
    assert torch.equal(rel.union_feature_extractor.feature_extractor.fc7.bias,
                       det.roi_heads['box'].feature_extractor.fc7.bias)
    assert torch.equal(model.backbone.fpn.fpn_layer2.weight, det.backbone.fpn.fpn_layer2.weight)
    # the report, computed independently from the two state dicts
    det_sd, own = det.state_dict(), model.state_dict()
    box = 'roi_heads.box.feature_extractor.'
    mapped = {}
    for src in RELATION_LOAD_MAPPING:
        mapped[src] = [k for k in own if k.startswith(src + '.')
                       and box + k[len(src) + 1:] in det_sd]
    # the union extractor's keys also contain the box extractor's name: the last entry wins
    assert mapped['roi_heads.relation.box_feature_extractor']
    same = [k for k in own if k in det_sd]
    assert sorted(report.loaded) == sorted(same + sum(mapped.values(), []))
    assert set(report.missing) == {k for k in own if k not in report.loaded
                                   and not k.endswith('num_batches_tracked')}
    assert any(k.startswith('roi_heads.relation.predictor.') for k in report.missing)
    assert report.total == len(report.loaded) + len(report.missing)
    assert not report.unexpected and not report.mismatched
    text = caplog.text
    assert 'loaded {} of {} tensors from det.pth ({} missing, 0 unexpected'.format(
        len(report.loaded), report.total, len(report.missing)) in text
    assert 'Some model parameters or buffers are not found in the checkpoint:' in text
    assert '  roi_heads.relation.predictor.rel.{bias, weight}' in text
    for src, keys in mapped.items():
        assert '{}.* <- {}.* ({} tensors)'.format(src, box[:-1], len(keys)) in text


def test_mapping_lines_by_entry_and_by_suffix():
    own = ['backbone.body.stem.conv1.weight', 'roi_heads.relation.box_feature_extractor.fc6.w',
           'roi_heads.box.feature_extractor.fc6.w', 'rpn.head.conv.weight']
    loaded = ['stem.conv1.weight', 'roi_heads.box.feature_extractor.fc6.w',
              'rpn.head.conv.weight']
    matched, applied = match_keys(own, loaded, RELATION_LOAD_MAPPING)
    assert mapping_lines(matched, applied, matched) == [
        'backbone.body.* <- * (1 tensor, by suffix)',
        'roi_heads.relation.box_feature_extractor.* <- roi_heads.box.feature_extractor.* '
        '(1 tensor)']


def test_other_shapes_are_refused_before_anything_is_copied():
    _, model = _det_and_relation()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg2 = tiny_cfg(relation_on=False)
    cfg2.MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM = 16     # a detector of another width
    with pytest.raises(WeightsLoadError, match=r"MODEL.PRETRAINED_DETECTOR_CKPT w16.pth: \d+ "
                                               r"tensors of other shapes than the model, e.g. "
                                               r"'roi_heads.box.feature_extractor.fc6.weight' "
                                               r"\(16, \d+\) in the file but \(32, \d+\) in "
                                               r"the model; was it trained with the same"):
        load_state_dict_with_mapping(model, build_detector(cfg2).state_dict(),
                                     RELATION_LOAD_MAPPING, source='w16.pth',
                                     what='MODEL.PRETRAINED_DETECTOR_CKPT')
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_nothing_loaded_or_partial_strict_load_is_refused():
    det, model = _det_and_relation()
    renamed = {'x.' + k + '.renamed': v for k, v in det.state_dict().items()}
    with pytest.raises(WeightsLoadError, match=r'^resume checkpoint r.pth: loaded 0 of \d+ '
                                               r'tensors; .*; FIX$'):
        load_state_dict_with_mapping(model, renamed, source='r.pth', what='resume checkpoint',
                                     fix='FIX')
    # a strict load (a resume) of a detector file into the relation model: missing keys
    with pytest.raises(WeightsLoadError, match=r'missing roi_heads.relation'):
        load_state_dict_with_mapping(model, det.state_dict(), source='d.pth', fix='FIX',
                                     allow_partial=False)
    own = model.state_dict()
    report = load_state_dict_with_mapping(model, own, source='own.pth', allow_partial=False)
    assert report.complete and len(report.loaded) == report.total


def _sgb_model_serialization():
    """SGB's ``utils/model_serialization.py`` as a module, or None without it; its
    ``import_file`` import (only used for the catalog) is replaced by ``None`` in the source,
    so that no ``maskrcnn_benchmark`` module is put in ``sys.modules``."""
    src = reference_source('Scene-Graph-Benchmark.pytorch',
                           'maskrcnn_benchmark/utils/model_serialization.py')
    stub = 'from maskrcnn_benchmark.utils.imports import import_file'
    if not src or stub not in src:
        return None
    return source_module('sgb_model_serialization', src.replace(stub, 'import_file = None'))


SGB = Recorder('sgb_load_mapping', _sgb_model_serialization,
               "SGB's utils/model_serialization.py")


def _digest(t):
    """SHA-256 of a tensor's dtype, shape and bytes: equal digests <=> equal tensors, so the
    recording need not hold the whole state (3 MB)."""
    t = t.detach().cpu().contiguous()
    head = '%s%s' % (t.dtype, tuple(t.shape))
    return hashlib.sha256(head.encode() + t.numpy().tobytes()).digest()


def _digests(state):
    """``(keys as newline-joined UTF-8 bytes, (len, 32) uint8 digests)`` of a state dict."""
    keys = np.frombuffer('\n'.join(state).encode(), np.uint8)
    return keys, np.array([np.frombuffer(_digest(v), np.uint8) for v in state.values()])


def _inputs_digest(model, ckpt):
    """One digest of the inputs SGB saw (the model's state and the checkpoint, keys and
    values), so that a change of the models built here fails as such."""
    h = hashlib.sha256()
    for state in (model.state_dict(), ckpt):
        for k, v in state.items():
            h.update(k.encode() + _digest(v))
    return np.frombuffer(h.digest(), np.uint8)


def _load_inputs():
    """The relation model to fill and the detector's DDP-saved (``module.``) checkpoint."""
    det, model = _det_and_relation()
    ckpt = OrderedDict(('module.' + k, v) for k, v in det.state_dict().items())
    return model, ckpt


@SGB.case
def sgb_load_state_dict(sgb):
    """Digest of every tensor of the relation model's state after SGB's ``load_state_dict``
    of the detector checkpoint with the relation load mapping, and a digest of the inputs."""
    model, ckpt = _load_inputs()
    _, ref = _det_and_relation(seed=1)
    ref.load_state_dict(model.state_dict())
    inputs = _inputs_digest(model, ckpt)
    sgb.load_state_dict(ref, ckpt, dict(RELATION_LOAD_MAPPING))
    keys, digests = _digests(ref.state_dict())
    return {'keys': keys, 'state': digests, 'inputs': inputs}


@pytest.mark.parametrize('source', SOURCES)
def test_same_state_as_sgb_load_state_dict(source):
    """The same model state as SGB's own ``load_state_dict`` (recorded as per-tensor SHA-256
    digests, so equal digests mean ``torch.equal`` tensors), against the recording and live."""
    ref = SGB.outputs('sgb_load_state_dict', source)
    model, ckpt = _load_inputs()
    assert np.array_equal(ref['inputs'], _inputs_digest(model, ckpt)), \
        'the models built by _det_and_relation changed: regenerate sgb_load_mapping'
    keys = list(model.state_dict())
    initial = dict(zip(keys, _digests(model.state_dict())[1]))
    report = load_state_dict_with_mapping(model, ckpt, RELATION_LOAD_MAPPING)
    want = dict(zip(ref['keys'].tobytes().decode().split('\n'), ref['state']))
    got = dict(zip(keys, _digests(model.state_dict())[1]))
    assert sorted(want) == sorted(got)
    assert all(np.array_equal(want[k], got[k]) for k in want)
    # what the report calls missing is what SGB left at its initial values
    assert report.missing and all(np.array_equal(want[k], initial[k]) for k in report.missing)
    assert not any(k.startswith('roi_heads.box.') for k in report.missing)


def _recorded_state(fixture):
    """A state dict laid out exactly as a recorded SGB model (``module.`` keys, DDP-saved):
    values on the meta device (no memory), but the buffers a meta-built model still holds
    as real tensors (anchors, batch counters) real."""
    return OrderedDict(('module.' + k, torch.zeros(s) if 'cell_anchors' in k or
                        'num_batches_tracked' in k else torch.empty(s, device='meta'))
                       for k, s, _ in fixture['keys'])


@pytest.mark.filterwarnings('ignore:for .*copying from a non-meta parameter')
@pytest.mark.parametrize('predictor', ['MotifPredictor', 'IMPPredictor', 'VCTreePredictor',
                                       'TransformerPredictor', 'CausalAnalysisPredictor'])
def test_sgb_x101_detector_and_relation_checkpoints(predictor, caplog):
    """SGB's X-101-32x8d-FPN detector checkpoint (recorded key -> shape list) through
    PRETRAINED_DETECTOR_CKPT's load_mapping into each relation model: the report shows both
    relation extractors filled from roi_heads.box.feature_extractor; SGB's relation
    checkpoint of that predictor resumes with 0 missing and 0 unexpected."""
    # pylint: disable-next=import-outside-toplevel
    from test_sgg_reference_layout import _SGB_RELATION, _SGB_X101, _cfg, _fixture, _statistics
    det = _fixture('sgb_detector_X-101-32x8d-FPN')
    rel = _fixture('sgb_relation_' + predictor)
    with torch.device('meta'):
        model = build_relation_model(_cfg(_SGB_X101 + _SGB_RELATION, relation=True,
                                          predictor=predictor), _statistics())
    report = load_state_dict_with_mapping(model, _recorded_state(det), RELATION_LOAD_MAPPING,
                                          source='model_final.pth', log=_listen(caplog),
                                          what='MODEL.PRETRAINED_DETECTOR_CKPT')
    det_keys = [k for k, _, _ in det['keys']]
    rel_keys = [k for k, _, _ in rel['keys']]
    box = [k for k in det_keys if k.startswith('roi_heads.box.feature_extractor.')]
    mapped = [k for k in rel_keys for src in RELATION_LOAD_MAPPING
              if k.startswith(src + '.') and k.replace(src, 'roi_heads.box.feature_extractor')
              in det_keys]
    assert len(box) == 4 and len(mapped) == 8      # fc6 / fc7 weight and bias, twice
    assert sorted(report.loaded) == sorted([k for k in rel_keys if k in det_keys] + mapped)
    assert report.total == len(rel_keys) - len(report.ignored)
    assert not report.unexpected and not report.mismatched
    assert all(k.startswith('roi_heads.relation.') for k in report.missing)
    for src in RELATION_LOAD_MAPPING:
        assert '{}.* <- roi_heads.box.feature_extractor.* (4 tensors)'.format(src) in caplog.text
    resume = load_state_dict_with_mapping(model, _recorded_state(rel), source='rel.pth',
                                          what='resume checkpoint', allow_partial=False)
    assert len(resume.loaded) == resume.total == len(rel_keys)
    assert not resume.missing and not resume.unexpected and not resume.ignored
