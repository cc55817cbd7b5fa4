"""do_vg_evaluation: detection AP, the relation block, outputs, and equality with SGB's own code.

The equality tests run twice: against SGB's outputs recorded in
``tests/fixtures/recorded/sgb_vg_eval.npz`` (everywhere, CI included) and live against
Scene-Graph-Benchmark's ``maskrcnn_benchmark/data/datasets/evaluation/vg/vg_eval.py`` and
``sgg_eval.py`` (checkout HEAD under ``$GLUONTRAIN_REFERENCES``, loaded by
``sgg_eval_support.load_live_sgb``: SGB's files written to a temp dir at run time, compiled
imports stubbed). Both compare the whole ``result_dict``, the returned score and the printed
block, on the same fake dataset and predictions (``random_case(seed, 10, mode, scale=1.5)``,
zero-shot rows ``ZS``). Regenerate the recording with
``GLUONTRAIN_REFERENCES=DIR python tests/fixtures/make_recorded_fixtures.py sgb_vg_eval``.
Numbers marked "SGB" in ``SGB_NUMBERS`` were obtained the same way for seed 1.
"""
import contextlib
import io
import json
import logging
import os

import numpy as np
import pytest
import torch
from yacs.config import CfgNode as CN

from fixtures.recorded import SOURCES, Recorder, from_json_array, json_array
from gluontrain.torch.sgg.config_values import relation_mode
from gluontrain.torch.sgg.evaluation import do_vg_evaluation, save_zeroshot_triplets
from gluontrain.torch.sgg.evaluation.vg_eval import (build_evaluators, evaluate_detection,
                                                     evaluate_relation_of_one_image)
from sgg_eval_support import (PREDICATES, FakeVG, load_live_sgb, make_prediction, random_case,
                              sgb_workdir)
from test_sgg_eval import (ZEROSHOT, case_duplicates, case_iou_boundary, case_truncation)

ZS = np.array([[1, 2, 1], [1, 3, 4], [2, 1, 3], [3, 4, 2], [5, 5, 1], [4, 1, 2], [2, 5, 3]])
# SGB on random_case(1, num_images=10, mode, scale=1.5): R@100, mR@100, ngR@100, printed mAP
SGB_NUMBERS = {
    'predcls': (0.29666666666666663, 0.31398809523809523, 0.9333333333333332, 0.9700),
    'sgcls': (0.11833333333333333, 0.20982142857142858, 0.39666666666666667, 0.5496),
    'sgdet': (0.125, 0.125, 0.20833333333333331, 0.3378),
}
MODES = ['predcls', 'sgcls', 'sgdet']
SEEDS = [0, 1, 2]
HAND_MODES = ['predcls', 'sgdet', 'phrdet']

SGB = Recorder('sgb_vg_eval', load_live_sgb, "SGB's evaluation source (vg_eval.py, sgg_eval.py)")


def cfg_for(mode, iou=0.5):
    """The cfg keys SGB's do_vg_evaluation reads, with SGB's defaults."""
    c = CN()
    c.MODEL = CN({'ATTRIBUTE_ON': False})
    c.MODEL.ROI_ATTRIBUTE_HEAD = CN({'NUM_ATTRIBUTES': 201})
    c.MODEL.ROI_RELATION_HEAD = CN({'USE_GT_BOX': mode != 'sgdet',
                                    'USE_GT_OBJECT_LABEL': mode == 'predcls',
                                    'NUM_CLASSES': len(PREDICATES)})
    c.TEST = CN()
    c.TEST.RELATION = CN({'MULTIPLE_PREDS': False, 'IOU_THRESHOLD': iou})
    return c


def capture(name):
    buf = io.StringIO()
    logger = logging.getLogger(name)
    logger.handlers, logger.propagate = [], False
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter('%(message)s'))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return logger, buf


def plain(x):
    """Nested lists/dicts of numbers as python floats, nan as the text 'nan' (comparable), in
    a JSON-safe form: each dict key written as its JSON (``20`` -> ``'20'``, ``'a'`` ->
    ``'"a"'``) so that a recorded tree keeps int keys apart from str keys."""
    if isinstance(x, dict):
        return {json.dumps(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return 'nan' if np.isnan(x) else float(x)


def block(text):
    """The evaluation block (from the first rule line), without pycocotools' table."""
    return text[text.index('\n' + '=' * 100):]


def run_ours(mode, ds, preds, out, **kw):
    logger, buf = capture('ours')
    score, rd = do_vg_evaluation(cfg_for(mode), ds, list(preds), str(out), logger,
                                 ('bbox', 'relations'), zeroshot_triplet=ZS,
                                 return_result_dict=True, **kw)
    return score, rd, buf.getvalue()


def test_relation_mode_from_cfg():
    assert [relation_mode(cfg_for(m)) for m in ('predcls', 'sgcls', 'sgdet')] == \
        ['predcls', 'sgcls', 'sgdet']


@pytest.mark.parametrize('mode', ['predcls', 'sgcls', 'sgdet'])
def test_recorded_sgb_numbers(mode, tmp_path):
    ds, preds = random_case(1, num_images=10, mode=mode, scale=1.5)
    score, rd, text = run_ours(mode, ds, preds, tmp_path, skip_images_without_predictions=True,
                               coco_ids_from_zero=True)
    r100, mr100, ngr100, m_ap = SGB_NUMBERS[mode]
    assert score == r100
    assert rd[mode + '_mean_recall'][100] == pytest.approx(mr100, abs=1e-15)
    assert np.mean(rd[mode + '_recall_nogc'][100]) == pytest.approx(ngr100, abs=1e-15)
    assert 'Detection evaluation mAp=%.4f\n' % m_ap in text
    if mode == 'predcls':
        # GT boxes with GT labels: AP 1 once the first GT box can be matched (SGB: 0.97)
        score, _, text = run_ours(mode, ds, preds, tmp_path)
        assert 'Detection evaluation mAp=1.0000\n' in text and score == r100


@SGB.case(params=['%d-%s' % (seed, mode) for seed in SEEDS for mode in MODES])
def do_vg_evaluation_outputs(sgb, param):
    """SGB's do_vg_evaluation on ``random_case(seed, 10, mode, scale=1.5)`` with ``ZS``: its
    returned score, printed block and the result_dict it saved (``plain``, as JSON)."""
    seed, mode = param.split('-')
    ds, preds = random_case(int(seed), num_images=10, mode=mode, scale=1.5)
    logger, buf = capture('sgb')
    # SGB reads its zero-shot file from a path relative to the cwd
    with sgb_workdir(ZS) as d, contextlib.redirect_stdout(io.StringIO()):
        out = os.path.join(d, 'ref')
        os.mkdir(out)
        score = sgb.vg_eval.do_vg_evaluation(cfg_for(mode), ds, list(preds), out, logger,
                                             ('bbox', 'relations'))
        rd = torch.load(os.path.join(out, 'result_dict.pytorch'), weights_only=False)
    return {'score': np.float64(score), 'block': block(buf.getvalue()),
            'result_dict': json_array(plain(rd))}


@pytest.mark.parametrize('source', SOURCES)
@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('seed', SEEDS)
def test_equal_to_sgb_do_vg_evaluation(seed, mode, source, tmp_path):
    """Same score, same result_dict, same printed block as SGB's do_vg_evaluation (recorded
    and live)."""
    ref = SGB.outputs('do_vg_evaluation_outputs[%d-%s]' % (seed, mode), source)
    ds, preds = random_case(seed, num_images=10, mode=mode, scale=1.5)
    score, rd, text = run_ours(mode, ds, preds, tmp_path, skip_images_without_predictions=True,
                               coco_ids_from_zero=True)
    assert score == float(ref['score'])
    assert block(text) == str(ref['block'])
    assert plain(rd) == from_json_array(ref['result_dict'])


def hand_cases_result(mode, impl=None):
    """The hand cases of test_sgg_eval through ``evaluate_relation_of_one_image`` of ``impl``
    (SGB's vg_eval module) or ours (None): ``(result_dict, printed strings)``."""
    cases = [case_duplicates(), case_truncation()]
    if mode != 'predcls':   # its pairs index 3 predicted boxes, PredCls has the 2 GT boxes
        cases.append(case_iou_boundary())
    ds = FakeVG([g for g, _ in cases])
    gts = [ds.get_groundtruth(i, evaluation=True) for i in range(len(ds))]
    rd = {}
    if impl is None:
        ev = build_evaluators(rd, mode, len(PREDICATES), PREDICATES)
        one = evaluate_relation_of_one_image
    else:
        ev = {name: cls(rd) for name, cls in (
            ('eval_recall', impl.SGRecall), ('eval_nog_recall', impl.SGNoGraphConstraintRecall),
            ('eval_zeroshot_recall', impl.SGZeroShotRecall),
            ('eval_ng_zeroshot_recall', impl.SGNGZeroShotRecall),
            ('eval_pair_accuracy', impl.SGPairAccuracy))}
        ev['eval_mean_recall'] = impl.SGMeanRecall(rd, len(PREDICATES), PREDICATES, True)
        ev['eval_ng_mean_recall'] = impl.SGNGMeanRecall(rd, len(PREDICATES), PREDICATES, True)
        for e in ev.values():
            e.register_container(mode)
        one = impl.evaluate_relation_of_one_image
    glob = {'zeroshot_triplet': ZEROSHOT, 'mode': mode, 'iou_thres': 0.5}
    for gt, (_, pred) in zip(gts, cases):
        one(gt, pred, glob, ev)
    ev['eval_mean_recall'].calculate_mean_recall(mode)
    ev['eval_ng_mean_recall'].calculate_mean_recall(mode)
    return rd, ''.join(ev[n].generate_print_string(mode) for n in ev)


@SGB.case(params=HAND_MODES)
def hand_cases(sgb, mode):
    """SGB's evaluators on the hand cases: result_dict (``plain``, as JSON) and printed text."""
    rd, text = hand_cases_result(mode, sgb.vg_eval)
    return {'result_dict': json_array(plain(rd)), 'text': text}


@pytest.mark.parametrize('source', SOURCES)
@pytest.mark.parametrize('mode', HAND_MODES)
def test_hand_cases_equal_sgb(mode, source):
    """The hand cases of test_sgg_eval through SGB's evaluate_relation_of_one_image (recorded
    and live)."""
    ref = SGB.outputs('hand_cases[%s]' % mode, source)
    ours, text = hand_cases_result(mode)
    assert text == str(ref['text'])
    assert plain(ours) == from_json_array(ref['result_dict'])


def test_detection_ap_by_hand():
    """SGDet boundary case: tree found exactly (AP 1); man: the .9 box overlaps .45 (false
    positive), the .7 box exactly .5 (true positive) -> precision .5 at recall 1, AP .5.
    Categories without ground truth do not count: mAP@0.5 = (1 + .5) / 2.
    SGB's annotation id 0 (the man, the first GT box) cannot be matched in pycocotools:
    its man AP is 0 and its mAP (0 + 1) / 2."""
    gt, pred = case_iou_boundary()
    ds = FakeVG([gt])
    m_ap, table = evaluate_detection([ds.get_groundtruth(0)], [pred], ds.ind_to_classes, 'sgdet')
    assert m_ap == pytest.approx(0.75)
    assert 'Average Precision' in table
    assert evaluate_detection([ds.get_groundtruth(0)], [pred], ds.ind_to_classes, 'sgdet',
                              coco_ids_from_zero=True)[0] == pytest.approx(0.5)
    # PredCls scores its GT labels 1.0 on GT boxes: AP 1
    gt, pred = case_duplicates()
    ds = FakeVG([gt])
    assert evaluate_detection([ds.get_groundtruth(0)], [pred], ds.ind_to_classes,
                              'predcls')[0] == pytest.approx(1.0)
    empty = make_prediction(np.zeros((0, 4)), (50, 50), [], [], [], [])
    assert evaluate_detection([ds.get_groundtruth(0)], [empty], ds.ind_to_classes,
                              'sgdet')[0] == 0.0


def test_predictions_are_resized_to_the_image_and_outputs_written(tmp_path):
    gt, pred = case_iou_boundary()
    ds = FakeVG([gt])
    big = pred.resize((80, 40))
    logger, buf = capture('resize')
    score, rd = do_vg_evaluation(cfg_for('sgdet'), ds, [big], str(tmp_path), logger,
                                 ('bbox', 'relations'), return_result_dict=True)
    assert score == 1.0 and rd['sgdet_recall'][20] == [1.0]
    assert 'Detection evaluation mAp=0.7500' in buf.getvalue()
    assert big.size == (80, 40)   # the caller's prediction is not replaced
    assert sorted(os.listdir(tmp_path)) == ['eval_results.pytorch', 'result_dict.pytorch',
                                            'visual_info.json']
    saved = torch.load(str(tmp_path / 'eval_results.pytorch'), weights_only=False)
    assert saved['predictions'][0].size == (40, 20)
    info = json.loads((tmp_path / 'visual_info.json').read_text())
    assert info[0]['groundtruth'][1] == [20.0, 0.0, 29.0, 9.0, 'tree']
    assert info[0]['img_file'].endswith('img0.jpg')
    assert torch.load(str(tmp_path / 'result_dict.pytorch'),
                      weights_only=False)['sgdet_recall'] == rd['sgdet_recall']


def test_return_values_and_zero_shot_file(tmp_path):
    gt, pred = case_duplicates()
    ds = FakeVG([gt])
    logger, _ = capture('ret')
    cfg = cfg_for('predcls')
    assert do_vg_evaluation(cfg, ds, [pred], None, logger, ('bbox',)) == pytest.approx(1.0)
    assert do_vg_evaluation(cfg, ds, [pred], None, logger, ()) == -1
    path = save_zeroshot_triplets(str(tmp_path / 'zs.pytorch'), ZEROSHOT)
    score, rd = do_vg_evaluation(cfg, ds, [pred], None, logger, ('relations',),
                                 zeroshot_triplet=path, return_result_dict=True)
    assert score == pytest.approx(2 / 3)
    assert rd['predcls_ng_zeroshot_recall'][20] == [1.0]
    assert not list(tmp_path.glob('*.tmp*'))
    with pytest.raises(FileNotFoundError, match='missing.pytorch'):
        do_vg_evaluation(cfg, ds, [pred], None, logger, ('relations',),
                         zeroshot_triplet=str(tmp_path / 'missing.pytorch'))
    # without zero-shot triplets the zR lines print nan, as SGB for a split without any
    logger, buf = capture('nozs')
    score, rd = do_vg_evaluation(cfg, ds, [pred], None, logger, ('relations',),
                                 return_result_dict=True)
    assert rd['predcls_zeroshot_recall'][20] == []
    assert 'zR @ 20: nan;' in buf.getvalue()


def test_pairs_outside_the_boxes_are_clear_errors():
    gt, pred = case_iou_boundary()
    ds = FakeVG([gt])
    logger, _ = capture('bad')
    # PredCls evaluates on the 2 GT boxes; the prediction's pair (2, 1) has no box 2 there
    with pytest.raises(ValueError, match='rel_pair_idxs points at box 2 .* 2 ground-truth'):
        do_vg_evaluation(cfg_for('predcls'), ds, [pred], None, logger, ('relations',))
    bad = FakeVG([dict(gt, rels=[[0, 5, 3]])])
    with pytest.raises(ValueError, match='relation_tuple points at box 5'):
        do_vg_evaluation(cfg_for('sgdet'), bad, [pred], None, logger, ('relations',))


def test_oracle_on_generated_vg_data(vg_root, tmp_path):
    """sgg-data's VGDataset (test split of the generated VG files) with its own ground truth
    as predictions, boxes in a 2x input size: R, ngR, zR = 1 and detection AP 1 in every
    mode; mR = the share of predicates present in the split's ground truth (absent ones 0)."""
    vg_dataset = pytest.importorskip('gluontrain.torch.sgg.data.vg_dataset')
    from gluontrain.torch.sgg.evaluation import (load_or_compute_zeroshot_triplets,
                                                 relation_metrics)

    def split(name):
        return vg_dataset.VGDataset(
            name, os.path.join(vg_root, 'VG_100K'),
            os.path.join(vg_root, 'VG-SGG-with-attri.h5'),
            os.path.join(vg_root, 'VG-SGG-dicts-with-attri.json'),
            os.path.join(vg_root, 'image_data.json'), num_val_im=2)
    test, train = split('test'), split('train')
    preds, present = [], set()
    for i in range(len(test)):
        gt = test.get_groundtruth(i, evaluation=True)
        rels = gt.get_field('relation_tuple').numpy()
        present.update(rels[:, 2].tolist())
        pairs, first = np.unique(rels[:, :2], axis=0, return_index=True)
        scores = np.eye(len(test.ind_to_predicates))[rels[first, 2]]
        w, h = gt.size
        pred = make_prediction(gt.bbox.numpy() * 2, (w * 2, h * 2), gt.get_field('labels'),
                               np.ones(len(gt)), pairs, scores, labels=gt.get_field('labels'))
        preds.append(pred)
    zs = load_or_compute_zeroshot_triplets(str(tmp_path / 'zs.pytorch'), train, test)
    for mode in ('predcls', 'sgcls', 'sgdet'):
        cfg = cfg_for(mode)
        cfg.MODEL.ROI_RELATION_HEAD.NUM_CLASSES = len(test.ind_to_predicates)
        logger, buf = capture('vg' + mode)
        score, rd = do_vg_evaluation(cfg, test, preds, None, logger, ('bbox', 'relations'),
                                     zeroshot_triplet=zs, return_result_dict=True)
        m = relation_metrics(rd, mode)
        assert score == 1.0 and 'Detection evaluation mAp=1.0000' in buf.getvalue()
        for k in (20, 50, 100):
            assert m['R@%d' % k] == m['ngR@%d' % k] == 1.0
            assert np.isnan(m['zR@%d' % k]) if not len(zs) else m['zR@%d' % k] == 1.0
            assert m['mR@%d' % k] == pytest.approx(len(present) /
                                                   (len(test.ind_to_predicates) - 1))
