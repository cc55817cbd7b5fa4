"""SGB's inference: iou_types from the config, predictions merged in image order, the files
the evaluation writes (``eval_results.pytorch``, ``result_dict.pytorch``) in SGB's layout,
and the ``TEST.ALLOW_LOAD_FROM_CACHE`` reader (safe; SGB's own files accepted).

The layout is asserted against SGB's documented one (``vg_eval.py``: ``torch.save({'groundtruths':
groundtruths, 'predictions': predictions})`` and ``torch.save(result_dict)``, the containers of
``sgg_eval.py``'s evaluators, the fields of ``get_groundtruth(evaluation=True)`` and of the
relation post-processor) and against the files SGB's own ``do_vg_evaluation`` writes for the
same dataset and predictions: recorded in ``tests/fixtures/recorded/sgb_inference_files.npz``
(everywhere) and live from the SGB checkout under ``$GLUONTRAIN_REFERENCES``. Regenerate with
``GLUONTRAIN_REFERENCES=DIR python tests/fixtures/make_recorded_fixtures.py
sgb_inference_files``.
"""
import io
import json
import logging
import os
import shutil
import sys
import tempfile
import types

import numpy as np
import pytest
import torch

from fixtures.recorded import SOURCES, Recorder, from_json_array, json_array
from gluontrain.core.load_report import WeightsLoadError
from gluontrain.data.vg import write_vg
from gluontrain.torch.sgg import recipe
from gluontrain.torch.sgg.config import CONFIGS_DIR, get_cfg, load_cfg
from gluontrain.torch.sgg.data.build import make_loader
from gluontrain.torch.sgg.inference import (EVAL_RESULTS, RESULT_DICT, accumulate_predictions,
                                            compute_on_dataset, inference, iou_types_of,
                                            load_cached_predictions)
from gluontrain.torch.twostage.structures import BoxList

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'evaluation'))
from sgg_eval_support import installed, load_live_sgb, sgb_workdir  # noqa: E402

TINY = ['SOLVER.IMS_PER_BATCH', '2', 'TEST.IMS_PER_BATCH', '2', 'DATASETS.NUM_VAL_IM', '4',
        'INPUT.MIN_SIZE_TRAIN', '(96,)', 'INPUT.MAX_SIZE_TRAIN', '160',
        'INPUT.MIN_SIZE_TEST', '96', 'INPUT.MAX_SIZE_TEST', '160']

# SGB's documented layout (vg_eval.py, sgg_eval.py, visual_genome.py, relation_head/inference.py)
GT_FIELDS = {'labels': torch.int64, 'attributes': torch.int64, 'relation': torch.int64,
             'relation_tuple': torch.int64}
PRED_FIELDS = {'pred_labels': torch.int64, 'pred_scores': torch.float32,
               'rel_pair_idxs': torch.int64, 'pred_rel_scores': torch.float32,
               'pred_rel_labels': torch.int64}
# result_dict: '<mode>_<name>' -> {20, 50, 100} -> type (per-image lists / one float / one
# list per predicate class)
RESULT_NAMES = {'recall': list, 'recall_nogc': list, 'zeroshot_recall': list,
                'ng_zeroshot_recall': list, 'accuracy_hit': list, 'accuracy_count': list,
                'mean_recall': float, 'mean_recall_collect': 'per-class',
                'mean_recall_list': list, 'ng_mean_recall': float,
                'ng_mean_recall_collect': 'per-class', 'ng_mean_recall_list': list}


def test_iou_types_as_relation_train_net():
    cfg = get_cfg()
    assert iou_types_of(cfg) == ('bbox',)
    cfg.MODEL.RELATION_ON = True
    assert iou_types_of(cfg) == ('bbox', 'relations')
    cfg.MODEL.ATTRIBUTE_ON = True
    assert iou_types_of(cfg) == ('bbox', 'relations', 'attributes')


def test_accumulate_orders_by_image_index(caplog):
    # the recipe's logger may not propagate (setup_logger): listen on it directly
    logger = logging.getLogger('gluontrain.sgg.inference')
    logger.addHandler(caplog.handler)
    try:
        assert accumulate_predictions({2: 'c', 0: 'a', 1: 'b'}) == ['a', 'b', 'c']
        assert accumulate_predictions({0: 'a', 2: 'c'}) == ['a', 'c']
    finally:
        logger.removeHandler(caplog.handler)
    assert 'not a contiguous set' in caplog.text


def predcls_predictions(root, out):
    """A PredCls model (untrained, seeded) on generated VG data written in ``root`` and its raw
    predictions: ``(cfg, val dataset, iou_types, model, loader, predictions)``."""
    write_vg(str(root), num_train=8, num_val=4, seed=1, image_size=(96, 128))
    cfg = load_cfg(os.path.join(CONFIGS_DIR, 'predcls_motifs_cpu.yaml'),
                   TINY + ['OUTPUT_DIR', str(out)], data_dir=str(root))
    torch.manual_seed(0)
    _, val, iou_types = recipe.get_dataset(None, cfg)
    _, model = recipe.get_net(cfg, [torch.device('cpu')])
    loader = make_loader(cfg, val, False)
    predictions = accumulate_predictions(compute_on_dataset(model, loader, torch.device('cpu')))
    return cfg, val, iou_types, model, loader, predictions


@pytest.fixture(scope='module')
def predcls(tmp_path_factory):
    """A PredCls model (untrained) on generated VG data, its raw predictions, and the files
    ``inference`` wrote."""
    out = tmp_path_factory.mktemp('out')
    cfg, val, iou_types, model, loader, predictions = predcls_predictions(
        tmp_path_factory.mktemp('vg'), out)
    folder = out / 'inference'
    folder.mkdir()
    score, result = inference(cfg, model, loader, 'VG_val', iou_types, 'cpu',
                              output_folder=str(folder))
    return types.SimpleNamespace(cfg=cfg, dataset=val, loader=loader, model=model,
                                 predictions=predictions, folder=folder, score=score,
                                 result=result, iou_types=iou_types)


def _boxlist_layout(b):
    return (type(b).__name__, b.bbox.dtype, tuple(b.bbox.shape), tuple(b.size), b.mode,
            {k: (v.dtype, tuple(v.shape)) for k, v in b.extra_fields.items()},
            sorted(getattr(b, 'triplet_extra_fields', [])))


def _result_layout(rd):
    def layout(v):
        if isinstance(v, dict):
            return {k: layout(x) for k, x in v.items()}
        if isinstance(v, list):
            return ('list', len(v), layout(v[0]) if v and isinstance(v[0], list) else None)
        # SGB's means are numpy.float64 (a float subclass), ours Python floats
        return 'float' if isinstance(v, float) else type(v).__name__
    return layout(rd)


def _load(path):
    with torch.serialization.safe_globals([BoxList]):
        return torch.load(str(path), weights_only=True)


def test_files_in_sgb_layout(predcls):
    ds, cfg = predcls.dataset, predcls.cfg
    names = sorted(os.listdir(str(predcls.folder)))
    assert {EVAL_RESULTS, RESULT_DICT} <= set(names)
    assert not [n for n in names if n.endswith('.tmp')]          # staged writes, renamed
    saved = _load(predcls.folder / EVAL_RESULTS)
    assert set(saved) == {'groundtruths', 'predictions'}
    assert len(saved['groundtruths']) == len(saved['predictions']) == len(ds) > 0
    num_rel = cfg.MODEL.ROI_RELATION_HEAD.NUM_CLASSES
    for i, (gt, pred) in enumerate(zip(saved['groundtruths'], saved['predictions'])):
        info = ds.get_img_info(i)
        for b in (gt, pred):        # predictions resized back to the original image
            assert isinstance(b, BoxList) and b.mode == 'xyxy'
            assert tuple(b.size) == (info['width'], info['height'])
            assert b.bbox.dtype == torch.float32 and b.bbox.shape[1:] == (4,)
        assert {k: v.dtype for k, v in gt.extra_fields.items()} == GT_FIELDS
        assert gt.triplet_extra_fields == ['relation']
        assert gt.get_field('relation_tuple').shape[1:] == (3,)
        fields = pred.extra_fields
        assert {k: fields[k].dtype for k in PRED_FIELDS} == PRED_FIELDS
        n, r = len(pred), len(fields['rel_pair_idxs'])
        assert fields['pred_labels'].shape == fields['pred_scores'].shape == (n,)
        assert fields['rel_pair_idxs'].shape == (r, 2)
        assert fields['pred_rel_scores'].shape == (r, num_rel)
        assert fields['pred_rel_labels'].shape == (r,)
    result = torch.load(str(predcls.folder / RESULT_DICT), weights_only=True)
    mode = 'predcls'
    assert set(result) == {'{}_{}'.format(mode, n) for n in RESULT_NAMES}
    for name, kind in RESULT_NAMES.items():
        value = result['{}_{}'.format(mode, name)]
        assert set(value) == {20, 50, 100}, name
        for per_k in value.values():
            if kind == 'per-class':
                assert isinstance(per_k, list) and len(per_k) == num_rel, name
            else:
                assert isinstance(per_k, kind), name
    assert 0 < len(result[mode + '_recall'][100]) <= len(ds)
    assert predcls.score == pytest.approx(sum(result[mode + '_recall'][100]) /
                                          len(result[mode + '_recall'][100]))
    assert _result_layout(result) == _result_layout(predcls.result)


class _NoModel(torch.nn.Module):
    def forward(self, *args):
        raise AssertionError('the cached predictions should have been used')


def test_cached_predictions_are_used_and_read_safely(predcls, tmp_path):
    folder = tmp_path / 'cache'
    folder.mkdir()
    shutil.copy(str(predcls.folder / EVAL_RESULTS), str(folder / EVAL_RESULTS))
    cfg = predcls.cfg.clone()
    cfg.defrost()
    cfg.TEST.ALLOW_LOAD_FROM_CACHE = True
    score, result = inference(cfg, _NoModel(), predcls.loader, 'VG_val', predcls.iou_types,
                              'cpu', output_folder=str(folder))
    assert score == predcls.score and result == predcls.result
    # another dataset size: refused, named
    with pytest.raises(WeightsLoadError, match=r'cached predictions .*eval_results.pytorch '
                                               r'holds \d+ images, the dataset 99'):
        load_cached_predictions(str(folder / EVAL_RESULTS), 99)


class _Hostile:
    def __reduce__(self):
        return (os.system, ('touch hostile-ran',))


def test_a_hostile_cache_is_refused_unexecuted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.save({'groundtruths': [], 'predictions': [_Hostile()]}, str(tmp_path / EVAL_RESULTS))
    with pytest.raises(WeightsLoadError, match='eval_results.pytorch holds objects other than '
                                               'tensors'):
        load_cached_predictions(str(tmp_path / EVAL_RESULTS))
    assert not (tmp_path / 'hostile-ran').exists()
    torch.save({'predictions': [torch.zeros(2)]}, str(tmp_path / 'other.pytorch'))
    with pytest.raises(WeightsLoadError, match="not SGB's eval_results layout"):
        load_cached_predictions(str(tmp_path / 'other.pytorch'))


def _fake_sgb_boxlist_module():
    """A stand-in for maskrcnn_benchmark.structures.bounding_box (only the class name
    matters to the pickle)."""
    mod = types.ModuleType('maskrcnn_benchmark.structures.bounding_box')

    class SGBBoxList:  # pylint: disable=too-few-public-methods
        pass
    SGBBoxList.__module__, SGBBoxList.__qualname__ = mod.__name__, 'BoxList'
    SGBBoxList.__name__ = 'BoxList'
    mod.BoxList = SGBBoxList
    return mod


def test_sgb_boxlist_pickles_read_as_ours(predcls, tmp_path):
    mod = _fake_sgb_boxlist_module()
    names = ('maskrcnn_benchmark', 'maskrcnn_benchmark.structures', mod.__name__)
    saved = {n: sys.modules.get(n) for n in names}
    for n in names[:2]:
        sys.modules[n] = types.ModuleType(n)
    sys.modules[mod.__name__] = mod
    try:
        preds = []
        for p in predcls.predictions:
            q = mod.BoxList()
            # maskrcnn-benchmark's BoxList (no triplet fields): bbox, size, mode, extra_fields
            q.__dict__.update(bbox=p.bbox, size=p.size, mode=p.mode,
                              extra_fields=dict(p.extra_fields))
            preds.append(q)
        buf = io.BytesIO()
        torch.save({'groundtruths': [], 'predictions': preds}, buf)
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m
    (tmp_path / EVAL_RESULTS).write_bytes(buf.getvalue())
    assert b'maskrcnn_benchmark.structures.bounding_box' in buf.getvalue()
    got = load_cached_predictions(str(tmp_path / EVAL_RESULTS), len(predcls.predictions))
    for a, b in zip(got, predcls.predictions):
        assert isinstance(a, BoxList) and torch.equal(a.bbox, b.bbox)
        assert a.triplet_extra_fields == [] and set(a.extra_fields) == set(b.extra_fields)
        assert torch.equal(a.get_field('pred_rel_scores'), b.get_field('pred_rel_scores'))


# -------------------------------------------------- SGB's own evaluation (recorded and live)
SGB = Recorder('sgb_inference_files', load_live_sgb, "SGB's evaluation source (vg_eval.py)")


def _to_sgb(b, cls):
    out = cls(b.bbox.clone(), b.size, b.mode)
    for k, v in b.extra_fields.items():
        out.add_field(k, v, is_triplet=k in b.triplet_extra_fields)
    return out


class _SGBView:
    """The dataset as SGB's evaluation sees it, ground truth as SGB's BoxList."""

    def __init__(self, dataset, cls):
        self.dataset, self.cls = dataset, cls

    def __getattr__(self, name):
        return getattr(self.dataset, name)

    def __len__(self):
        return len(self.dataset)

    def get_groundtruth(self, index, evaluation=False, flip_img=False):
        return _to_sgb(self.dataset.get_groundtruth(index, evaluation, flip_img), self.cls)


def _jsonable(x):
    """A layout tree as JSON-safe values: dtypes as text, tuples as lists, each dict key as
    its JSON (so int keys stay apart from str keys)."""
    if isinstance(x, dict):
        return {json.dumps(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return str(x) if isinstance(x, torch.dtype) else x


def _eval_results_layout(saved):
    """``{'groundtruths' | 'predictions': [layout of each BoxList]}`` of an eval_results file."""
    return _jsonable({key: [_boxlist_layout(b) for b in boxes] for key, boxes in saved.items()})


@SGB.case
def sgb_files(sgb):
    """SGB's do_vg_evaluation on the ``predcls`` fixture's dataset and predictions (rebuilt
    here from the same seeds): the layout and boxes of its eval_results.pytorch, the layout of
    its result_dict.pytorch, its score and the eval_results file's bytes (SGB's pickles)."""
    with tempfile.TemporaryDirectory() as d:
        cfg, val, iou_types, _, _, predictions = predcls_predictions(
            os.path.join(d, 'vg'), os.path.join(d, 'out'))
        # SGB reads its zero-shot file relative to the cwd; its pickles name its BoxList's
        # module, so its modules are in sys.modules while they are written and read
        with sgb_workdir() as cwd, installed(sgb.modules):
            out = os.path.join(cwd, 'sgb_out')
            os.mkdir(out)
            cls = sgb.bounding_box.BoxList
            preds = [_to_sgb(p, cls) for p in predictions]
            score = sgb.vg_eval.do_vg_evaluation(cfg, _SGBView(val, cls), preds, out,
                                                 logging.getLogger('sgb-vg-eval'), iou_types)
            # SGB's files, read by torch alone (its BoxList importable here)
            with torch.serialization.safe_globals([cls]):
                theirs = torch.load(os.path.join(out, EVAL_RESULTS), weights_only=True)
            # SGB's result_dict holds numpy scalars: read as SGB does (a file it just wrote)
            their_rd = torch.load(os.path.join(out, RESULT_DICT), weights_only=False)
            with open(os.path.join(out, EVAL_RESULTS), 'rb') as f:
                data = f.read()
    return {'eval_results_layout': json_array(_eval_results_layout(theirs)),
            'bbox': {key: {str(i): b.bbox for i, b in enumerate(boxes)}
                     for key, boxes in theirs.items()},
            'result_dict_layout': json_array(_jsonable(_result_layout(their_rd))),
            'score': np.float64(score), 'eval_results_file': np.frombuffer(data, np.uint8)}


@pytest.mark.parametrize('source', SOURCES)
def test_layout_equals_the_files_of_sgb_do_vg_evaluation(predcls, tmp_path, source):
    """Our files against those of SGB's do_vg_evaluation (recorded and live)."""
    ref = SGB.outputs('sgb_files', source)
    ours = _load(predcls.folder / EVAL_RESULTS)
    # same keys, lengths, BoxList types, sizes, modes, fields (dtype, shape)
    assert from_json_array(ref['eval_results_layout']) == _eval_results_layout(ours)
    for key in ours:
        for i, b in enumerate(ours[key]):
            assert torch.equal(torch.from_numpy(ref['bbox/%s/%d' % (key, i)]), b.bbox), key
    our_rd = torch.load(str(predcls.folder / RESULT_DICT), weights_only=True)
    assert from_json_array(ref['result_dict_layout']) == \
        _jsonable(_result_layout(our_rd))
    assert float(ref['score']) == pytest.approx(predcls.score, abs=1e-12)
    # and SGB's own file is a cache this recipe reads
    (tmp_path / EVAL_RESULTS).write_bytes(ref['eval_results_file'].tobytes())
    got = load_cached_predictions(str(tmp_path / EVAL_RESULTS), len(ours['predictions']))
    assert all(torch.equal(a.bbox, b.bbox) for a, b in zip(got, ours['predictions']))
