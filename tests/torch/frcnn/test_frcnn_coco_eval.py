"""COCO box AP: record conversion by hand, oracle AP 1, seamseg's traps fixed."""
import json
import os

import pytest
import torch

from gluontrain.data import synthetic
from gluontrain.torch.frcnn import coco_eval as E
from gluontrain.torch.frcnn.data import make_dataset
from gluontrain.torch.frcnn.transform import ISSTransform


def test_process_prediction_by_hand():
    bbx = torch.tensor([[10., 20., 60., 220.], [-5., 0., 20., 30.]])
    recs = E.process_prediction(bbx, torch.tensor([0, 2]), torch.tensor([.9, .4]),
                                (100, 200), 'img7', (50, 400), categories=[3, 5, 8])
    # y scaled by 50/100, x by 400/200, clamped to [0, 50] x [0, 400]
    # x1 = 220 * 2 = 440 clamps to 400: width 360
    assert recs[0] == {'image_id': 'img7', 'category_id': 3, 'score': pytest.approx(.9),
                       'bbox': pytest.approx([40., 5., 360., 25.])}
    assert recs[1]['bbox'] == pytest.approx([0., 0., 60., 10.]) and recs[1]['category_id'] == 8
    assert E.process_prediction(torch.zeros(0, 4), torch.zeros(0), torch.zeros(0),
                                (1, 1), 0, (1, 1)) == []


def _oracle(gt_file, categories=None, skip=()):
    with open(gt_file) as f:
        gt = json.load(f)
    preds = []
    for a in gt['annotations']:
        if not a['iscrowd'] and a['image_id'] not in skip:
            preds.append({'image_id': a['image_id'], 'category_id': a['category_id'],
                          'score': 1.0, 'bbox': a['bbox']})
    return preds, [img['id'] for img in gt['images']]


def test_oracle_scores_one_on_coco_and_iss(coco_root, tmp_path):
    gt_file = os.path.join(coco_root, 'annotations', 'instances_val2017.json')
    preds, ids = _oracle(gt_file)
    assert E.summarize(preds, gt_file, ids) == pytest.approx(1.0)
    iss = synthetic.write_iss(str(tmp_path / 'iss'), num_train=1, num_val=4, seed=1)
    iss_gt = os.path.join(iss, 'coco', 'val.json')
    preds, ids = _oracle(iss_gt)
    assert E.summarize(preds, iss_gt, ids) == pytest.approx(1.0)


def test_images_without_detections_still_count(coco_root):
    gt_file = os.path.join(coco_root, 'annotations', 'instances_val2017.json')
    with open(gt_file) as f:
        gt = json.load(f)
    with_objects = sorted({a['image_id'] for a in gt['annotations'] if not a['iscrowd']})
    preds, ids = _oracle(gt_file, skip={with_objects[0]})
    fixed = E.summarize(preds, gt_file, ids)
    reference = E.summarize(preds, gt_file, ids, reference_img_filter=True)
    assert reference == pytest.approx(1.0)  # seamseg: the missed image drops out
    assert fixed < 0.99                      # here its objects count as misses
    assert E.summarize([], gt_file, ids) == 0.0  # seamseg: IndexError in loadRes


def test_category_map(coco_root, tmp_path):
    coco = make_dataset(coco_root, 'val2017', ISSTransform(64, 64))
    assert E.category_map(coco)[:3] == [1, 2, 3] and len(E.category_map(coco)) == 80
    iss = synthetic.write_iss(str(tmp_path / 'iss'), num_train=1, num_val=1, seed=1)
    ds = make_dataset(iss, 'val', ISSTransform(64, 64))
    assert E.category_map(ds) == list(range(1, 11))
