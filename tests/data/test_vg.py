"""The Visual Genome scene-graph writer and load_vg, checked against the h5 layout SGB reads."""
import json
import os

import h5py
import numpy as np
import pytest
from PIL import Image

from gluontrain.data import load_vg, load_vg_vocab, vg

# the documented palette, by hand
PALETTE = {'red': (220, 40, 40), 'green': (40, 170, 60), 'blue': (40, 80, 225),
           'yellow': (240, 215, 40), 'magenta': (210, 50, 210), 'cyan': (40, 205, 215),
           'orange': (245, 135, 30), 'white': (248, 248, 248), 'black': (22, 22, 22),
           'purple': (130, 30, 200)}
DTYPES = {'split': ('int32', 1), 'img_to_first_box': ('int32', 1), 'img_to_last_box': ('int32', 1),
          'img_to_first_rel': ('int32', 1), 'img_to_last_rel': ('int32', 1),
          'boxes_1024': ('int32', 4), 'boxes_512': ('int32', 4), 'labels': ('int64', 1),
          'attributes': ('int64', 10), 'relationships': ('int32', 2), 'predicates': ('int64', 1),
          'active_object_mask': ('bool', 1)}


def h5(root):
    with h5py.File(os.path.join(root, vg.H5_NAME), 'r') as f:
        return {k: f[k][:] for k in f}


def test_files_and_h5_layout(vg_root):
    assert sorted(os.listdir(vg_root)) == sorted([vg.H5_NAME, vg.DICTS_NAME, vg.IMAGE_DATA,
                                                  vg.IMAGE_DIR])
    d = h5(vg_root)
    assert set(d) == set(DTYPES)
    n_box, n_rel = len(d['labels']), len(d['relationships'])
    for key, (dtype, cols) in DTYPES.items():
        assert d[key].dtype == np.dtype(dtype), key
        if key in ('split',) or key.startswith('img_to'):
            assert d[key].shape == (18,)
        else:
            assert d[key].shape == ((n_rel if key in ('relationships', 'predicates') else n_box),
                                    cols), key
    assert d['split'].tolist() == [0] * 12 + [2] * 6
    # contiguous inclusive ranges, -1 where none
    assert d['img_to_first_box'][0] == 0 and d['img_to_last_box'][-1] == n_box - 1
    assert (d['img_to_first_box'][1:] == d['img_to_last_box'][:-1] + 1).all()
    has_rel = d['img_to_first_rel'] >= 0
    assert has_rel.sum() >= 12
    assert ((d['img_to_last_rel'] >= 0) == has_rel).all()
    for i in np.flatnonzero(has_rel):
        rels = d['relationships'][d['img_to_first_rel'][i]:d['img_to_last_rel'][i] + 1]
        assert rels.min() >= d['img_to_first_box'][i] and rels.max() <= d['img_to_last_box'][i]
        assert (rels[:, 0] != rels[:, 1]).all()


def test_dicts_format(vg_root):
    with open(os.path.join(vg_root, vg.DICTS_NAME)) as f:
        info = json.load(f)
    assert set(info) == {'label_to_idx', 'idx_to_label', 'predicate_to_idx', 'idx_to_predicate',
                         'attribute_to_idx', 'idx_to_attribute', 'object_count',
                         'predicate_count', 'attribute_count'}
    assert info['label_to_idx']['circle'] == 1 and info['idx_to_label']['8'] == 'triangle'
    assert info['predicate_to_idx']['above'] == 1 and info['idx_to_predicate']['10'] == 'on'
    for fwd, back in (('label_to_idx', 'idx_to_label'), ('predicate_to_idx', 'idx_to_predicate'),
                      ('attribute_to_idx', 'idx_to_attribute')):
        assert sorted(info[fwd].values()) == list(range(1, len(info[fwd]) + 1))  # 0: background
        assert info[back] == {str(v): k for k, v in info[fwd].items()}
    d = h5(vg_root)
    assert sum(info['object_count'].values()) == len(d['labels'])
    assert sum(info['predicate_count'].values()) == len(d['predicates'])
    vocab = load_vg_vocab(vg_root)
    assert vocab['classes'][0] == vocab['predicates'][0] == '__background__'
    assert vocab['classes'][1:] == sorted(info['label_to_idx'])


def test_image_data_matches_images(vg_root):
    with open(os.path.join(vg_root, vg.IMAGE_DATA)) as f:
        data = json.load(f)
    assert [e['image_id'] for e in data] == list(range(1, 19))
    for e in data:
        assert set(e) == {'image_id', 'url', 'width', 'height', 'coco_id', 'flickr_id'}
        with Image.open(os.path.join(vg_root, vg.IMAGE_DIR, '{}.jpg'.format(e['image_id']))) as im:
            assert im.size == (e['width'], e['height'])


def test_encode_box_hand_computed():
    # 200x100 image, box (10, 20)-(50, 60): scale 5.12 -> x=floor(51.2), w=ceil(204.8)
    np.testing.assert_array_equal(vg.encode_box((10, 20, 50, 60), 200, 100, 1024),
                                  [51 + 102, 102 + 102, 205, 205])
    # 512 scale: x=floor(25.6)=25, y=floor(51.2)=51, w=h=ceil(102.4)=103
    np.testing.assert_array_equal(vg.encode_box((10, 20, 50, 60), 200, 100, 512),
                                  [25 + 51, 51 + 51, 103, 103])


def test_load_vg_decodes_like_sgb(tmp_path):
    """SGB: x1 = int(cx - w / 2) in the int32 array, x2 = x1 + w, then * max(w, h) / 1024."""
    root = str(tmp_path)
    with h5py.File(os.path.join(root, vg.H5_NAME), 'w') as f:
        f['split'] = np.array([0, 2], np.int32)
        for k, v in (('img_to_first_box', [0, 1]), ('img_to_last_box', [0, 1]),
                     ('img_to_first_rel', [-1, -1]), ('img_to_last_rel', [-1, -1])):
            f[k] = np.array(v, np.int32)
        f['boxes_1024'] = np.array([[153, 204, 205, 205], [100, 100, 10, 10]], np.int32)
        f['labels'] = np.array([[1], [2]], np.int64)
        f['attributes'] = np.zeros((2, 10), np.int64)
        f['relationships'] = np.zeros((0, 2), np.int32)
        f['predicates'] = np.zeros((0, 1), np.int64)
    with open(os.path.join(root, vg.IMAGE_DATA), 'w') as f:
        json.dump([{'image_id': 7, 'width': 200, 'height': 100},
                   {'image_id': 8, 'width': 512, 'height': 512}], f)
    # load_vg checks the dataset first, and a dataset has its dictionaries
    with open(os.path.join(root, vg.DICTS_NAME), 'w') as f:
        json.dump({'idx_to_label': {'1': 'a', '2': 'b'}, 'idx_to_predicate': {}}, f)
    (rec,) = load_vg(root, 'train', filter_empty_rels=False)
    # x1 = trunc(153 - 102.5) = 50, y1 = trunc(204 - 102.5) = 101
    np.testing.assert_allclose(rec['boxes'], [[50 * 200 / 1024, 101 * 200 / 1024,
                                               255 * 200 / 1024, 306 * 200 / 1024]])
    assert rec['image_id'] == 7 and rec['relations'].shape == (0, 3)
    assert load_vg(root, 'train') == []  # filter_empty_rels drops it, as SGB does
    (test,) = load_vg(root, 'test', filter_empty_rels=False)
    np.testing.assert_allclose(test['boxes'], [[47.5, 47.5, 52.5, 52.5]])


def test_load_vg_boxes_frame_the_drawn_shapes(vg_root):
    vocab = load_vg_vocab(vg_root)
    recs = load_vg(vg_root, 'train', filter_empty_rels=False) + load_vg(
        vg_root, 'test', filter_empty_rels=False)
    assert len(recs) == 18
    checked = 0
    for rec in recs:
        pixels = np.asarray(Image.open(rec['file_name']).convert('RGB'), np.float64)
        boxes = rec['boxes']
        for k, (box, attrs) in enumerate(zip(boxes, rec['attributes'])):
            others = np.delete(boxes, k, axis=0)
            if ((np.minimum(others[:, 2:], box[2:]) + 6 > np.maximum(others[:, :2], box[:2]))
                    .all(1)).any():
                continue  # a neighbour within 5 px would enter the patch
            colour = vocab['attributes'][attrs[0]]
            x1, y1, x2, y2 = np.round(box).astype(int)
            lo_x, lo_y = max(0, x1 - 4), max(0, y1 - 4)
            patch = pixels[lo_y:y2 + 4, lo_x:x2 + 4]
            mask = np.linalg.norm(patch - PALETTE[colour], axis=2) < 45
            # columns/rows with 2+ matching pixels: a stray background pixel can match too
            xs, ys = np.flatnonzero(mask.sum(0) >= 2), np.flatnonzero(mask.sum(1) >= 2)
            # 1024-scale rounding (< 1 px here), JPEG edges, and a star's 1-px-wide tips
            tol = 3.5 if vocab['classes'][rec['labels'][k]] == 'star' else 2.5
            assert abs(xs.min() + lo_x - box[0]) <= tol and abs(xs.max() + 1 + lo_x - box[2]) <= tol
            assert abs(ys.min() + lo_y - box[1]) <= tol and abs(ys.max() + 1 + lo_y - box[3]) <= tol
            checked += 1
    assert checked >= 15


def test_relations_follow_geometry(vg_root):
    vocab = load_vg_vocab(vg_root)
    seen = set()
    for rec in load_vg(vg_root, 'train') + load_vg(vg_root, 'test'):
        b = rec['boxes']
        tol = 2.5  # 1024-scale rounding at image scale
        for s, o, p in rec['relations']:
            name = vocab['predicates'][p]
            seen.add(name)
            (sx1, sy1, sx2, sy2), (ox1, oy1, ox2, oy2) = b[s], b[o]
            if name == 'in':
                assert sx1 >= ox1 - tol and sy1 >= oy1 - tol
                assert sx2 <= ox2 + tol and sy2 <= oy2 + tol
            elif name == 'on':
                assert ox1 - tol <= (sx1 + sx2) / 2 <= ox2 + tol and sy1 < oy1
                assert abs(sy2 - oy1) <= max(4, (sy2 - sy1) / 5) + tol
            elif name == 'left of':
                assert sx2 <= ox1 + tol
            elif name == 'right of':
                assert sx1 >= ox2 - tol
            elif name == 'above':
                assert sy2 <= oy1 + tol
            elif name == 'below':
                assert sy1 >= oy2 - tol
    assert {'on', 'in'} <= seen and len(seen) >= 6


def test_load_vg_splits_and_filters(vg_root):
    train = load_vg(vg_root, 'train', filter_empty_rels=False)
    assert [r['image_id'] for r in train] == list(range(1, 13))
    assert [r['image_id'] for r in load_vg(vg_root, 'val', num_val_im=4,
                                           filter_empty_rels=False)] == [1, 2, 3, 4]
    assert [r['image_id'] for r in load_vg(vg_root, 'train', num_val_im=4,
                                           filter_empty_rels=False)] == list(range(5, 13))
    overlapping = load_vg(vg_root, 'train', filter_non_overlap=True)
    for rec in overlapping:
        b = rec['boxes']
        for s, o, _ in rec['relations']:
            assert min(b[s][2], b[o][2]) + 1 > max(b[s][0], b[o][0])
            assert min(b[s][3], b[o][3]) + 1 > max(b[s][1], b[o][1])
    assert len(overlapping) >= 6
    with pytest.raises(ValueError, match='split'):
        load_vg(vg_root, 'dev')


def test_load_graphs_num_im_and_carve_out_as_sgb(vg_root):
    path = os.path.join(vg_root, vg.H5_NAME)
    d = h5(vg_root)
    usable = np.flatnonzero((d['split'] == 0) & (d['img_to_first_box'] >= 0)
                            & (d['img_to_first_rel'] >= 0))
    mask, boxes, labels, attrs, rels = vg.load_graphs(path, 'train', num_im=5, num_val_im=2)
    assert np.flatnonzero(mask).tolist() == usable[2:5].tolist()
    assert len(boxes) == len(labels) == len(attrs) == len(rels) == 3
    assert boxes[0].dtype == np.int32 and rels[0].dtype == np.int64
    # the carve-out applies to train/val only: the test split keeps its first images
    test_rows = np.flatnonzero((d['split'] == 2) & (d['img_to_first_rel'] >= 0))
    mask, *_ = vg.load_graphs(path, 'test', num_val_im=2)
    assert np.flatnonzero(mask).tolist() == test_rows.tolist()
    # centre -> corner in int32, truncating as SGB's in-place update does
    first = d['img_to_first_box'][usable[2]]
    cx, cy, w, h = d['boxes_1024'][first]
    x1, y1 = int(cx - w / 2), int(cy - h / 2)
    assert boxes[0][0].tolist() == [x1, y1, int(x1 + w), int(y1 + h)]
