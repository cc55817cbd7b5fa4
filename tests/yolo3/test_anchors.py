"""gluontrain.yolo3.anchors and scripts/propose_anchors.py: --anchors text, the anchors of a
weights file, k-means on 1 - IoU of box shapes (numpy only)."""
import argparse
import importlib.util
import os

import numpy as np
import pytest

from gluontrain.core.checkpoint import resume_changes
from gluontrain.data import synthetic
from gluontrain.yolo3.anchors import (GLUONCV_ANCHORS, GLUONCV_ANCHORS_TEXT, anchor_scales,
                                      anchors_arg, anchors_line, anchors_text, check_anchors,
                                      file_anchors, mean_best_iou, propose_anchors, wh_iou)
from gluontrain.yolo3.args import RESUME_MUST_MATCH, parse_args, saved_args

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CUSTOM = '40,10,60,15,80,20;100,25,120,30,160,40;200,50,240,60,320,80'


def _skewed_boxes(n=400, seed=0):
    """Boxes four times wider than high, 8 to 80 px high (GluonCV's anchors are near square)."""
    heights = np.random.RandomState(seed).uniform(8, 80, n)
    return np.stack([4 * heights, heights], axis=1)


def test_gluoncv_anchors_as_text_and_back():
    assert GLUONCV_ANCHORS_TEXT == '10,13,16,30,33,23;30,61,62,45,59,119;116,90,156,198,373,326'
    assert anchor_scales('') == [list(s) for s in GLUONCV_ANCHORS]
    assert parse_args([]).anchors == GLUONCV_ANCHORS_TEXT
    # spaces, decimals and float32 round trips give one canonical text
    args = parse_args(['--anchors', ' 40, 10,60,15,80,20 ;100,25,120,30,160,40;200,50,240,60,'
                                    '320,80.50'])
    assert args.anchors == CUSTOM[:-2] + '80.5'
    assert anchors_text(np.float32(anchor_scales(args.anchors))) == args.anchors
    assert 'anchors' in RESUME_MUST_MATCH


@pytest.mark.parametrize('text, says', [
    ('10,13,16,30,33,23', "has 1 scale, YOLOv3 has 3"),
    ('10,13,16,30,33,23;30,61,62,45,59,119;116,90,156,198,373', 'scale 3'),
    ('10,13,16,30,33,23;30,61,62,45,59,119;116,90,156,198,373,x', "'x' is not a number"),
    ('10,13,16,30,33,23;30,61,62,45,59,119;116,90,156,198,373,0', '0 is not a positive size'),
    ('10,13,16,30,33,23;30,61,62,45,59,119;116,90,156,198,373,inf', 'inf is not a positive'),
    ('1,2;3,4;5,6;7,8', 'has 4 scales'),
])
def test_anchors_argument_refuses_anything_else_in_one_line(text, says, capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(['--anchors', text])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert 'error: argument --anchors: ' in err
    assert says in err and GLUONCV_ANCHORS_TEXT in err


def test_wh_iou_by_hand():
    # (4, 1) and (2, 2) centred: overlap 2 x 1 = 2, union 4 + 4 - 2 = 6
    np.testing.assert_allclose(wh_iou([[4, 1]], [[2, 2], [4, 1], [8, 2]]), [[1 / 3, 1, 0.25]])
    assert mean_best_iou([[4, 1], [2, 2]], [[2, 2], [4, 1]] + [[1, 1]] * 7) == 1.0


def test_proposed_anchors_fit_wide_boxes_much_better_than_gluoncvs():
    boxes = _skewed_boxes()
    proposed = propose_anchors(boxes)
    pairs = np.asarray(proposed, dtype=float).reshape(-1, 2)
    # three scales of three pairs, sorted by area, every one about 4:1 like the boxes
    assert len(proposed) == 3 and all(len(s) == 6 for s in proposed)
    assert np.all(np.diff(pairs[:, 0] * pairs[:, 1]) >= 0)
    assert np.all(np.abs(pairs[:, 0] / pairs[:, 1] - 4) < 0.3)
    default, ours = mean_best_iou(boxes, GLUONCV_ANCHORS), mean_best_iou(boxes, proposed)
    # GluonCV's best fit for a 4:1 box is a near-square anchor: IoU ~ 0.4; ours ~ 0.9
    assert default < 0.45 and ours > 0.85 and ours - default > 0.4, (default, ours)
    # the text round-trips through --anchors
    assert anchor_scales(anchors_arg(anchors_text(proposed))) == proposed


def test_kmeans_is_deterministic_with_its_seed():
    boxes = np.concatenate([_skewed_boxes(200, 1), _skewed_boxes(200, 2)[:, ::-1]])
    assert propose_anchors(boxes, seed=3) == propose_anchors(boxes, seed=3)
    assert propose_anchors(boxes, seed=0) == propose_anchors(boxes.copy(), seed=0)
    with pytest.raises(ValueError, match='multiple of 3'):
        propose_anchors(boxes, k=8)
    with pytest.raises(ValueError, match='distinct box shapes'):
        propose_anchors([[10, 10]] * 20)


def test_file_anchors_are_read_deep_first_and_checked():
    # save_parameters names: yolo_outputs.0 is the deep (stride 32) output
    arrays = {'yolo_outputs.{}.anchors'.format(i): np.float32(scale).reshape(1, 1, 3, 2)
              for i, scale in enumerate(anchor_scales(CUSTOM)[::-1])}
    arrays['yolo_outputs.0.offsets'] = np.zeros((1, 1, 2, 2, 2), np.float32)
    assert file_anchors(arrays) == CUSTOM
    assert file_anchors({'stages.0.0.weight': np.zeros(3)}) is None
    assert check_anchors(CUSTOM, CUSTOM, 'same', '--resume', 'f.params')
    assert check_anchors(CUSTOM, GLUONCV_ANCHORS_TEXT, 'file', '--params', 'f.params')
    assert not check_anchors(CUSTOM, GLUONCV_ANCHORS_TEXT, 'network', '--transfer', 'f')
    with pytest.raises(ValueError) as e:
        check_anchors(CUSTOM, GLUONCV_ANCHORS_TEXT, 'same', '--load-weights', 'f.params')
    message = str(e.value)
    assert '\n' not in message and message.startswith('--load-weights f.params was trained '
                                                      'with --anchors ' + CUSTOM)
    assert GLUONCV_ANCHORS_TEXT + " (GluonCV's)" in message and message.count(CUSTOM) == 2
    assert anchors_line(GLUONCV_ANCHORS_TEXT) is None
    assert anchors_line(CUSTOM) == 'anchors (from the file): ' + CUSTOM
    assert anchors_line(CUSTOM, CUSTOM) is None and CUSTOM in anchors_line(GLUONCV_ANCHORS_TEXT,
                                                                            CUSTOM)


def test_resume_refuses_other_anchors_also_of_a_checkpoint_from_before_the_argument():
    now = argparse.Namespace(anchors=CUSTOM, network='darknet53')
    for saved in ({'network': 'darknet53'}, {'network': 'darknet53',
                                             'anchors': GLUONCV_ANCHORS_TEXT}):
        with pytest.raises(ValueError, match='--anchors'):
            resume_changes(saved_args(saved), now, RESUME_MUST_MATCH, 'last.ckpt')
    assert resume_changes(saved_args({'network': 'darknet53', 'anchors': CUSTOM}), now,
                          RESUME_MUST_MATCH, 'last.ckpt') == []


def _script():
    spec = importlib.util.spec_from_file_location(
        'propose_anchors_script', os.path.join(ROOT, 'scripts', 'propose_anchors.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_script_proposes_better_anchors_for_a_generated_voc(tmp_path, capsys):
    # images of 48..160 px each side, squeezed to 416 x 416: boxes of many shapes
    root = synthetic.write_voc(str(tmp_path), num_train=8, num_val=2, seed=0,
                               image_size=(48, 160), max_objects=3, object_size=(0.15, 0.3))
    text = _script().main(['--dataset', 'voc', '--dataset-root', root, '--data-shape', '416'])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('30 training boxes in 16 images of ' + root)
    default = float(out[1].split(':')[-1])
    proposed = float(out[2].split(':')[-1])
    assert proposed > default + 0.15, (default, proposed)
    assert out[3] == "--anchors '{}'".format(text) and anchors_arg(text) == text
    assert parse_args(['--anchors', text]).anchors == text
