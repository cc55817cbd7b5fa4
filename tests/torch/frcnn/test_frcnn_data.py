"""ISS and COCO datasets: generator -> dataset round trip, category mapping, bad input."""
import json
import os
import shutil

import numpy as np
import pytest

from gluontrain.data import msgpack, synthetic
from gluontrain.torch.frcnn import data as D
from gluontrain.torch.frcnn.transform import ISSTransform


@pytest.fixture(scope='module')
def iss_root(tmp_path_factory):
    root = tmp_path_factory.mktemp('iss')
    return synthetic.write_iss(str(root), num_train=6, num_val=4, seed=3, image_size=96,
                               crowd_prob=0.5)


def _identity():
    return ISSTransform(96, 1000)  # fixed 96 px images: scale 1


def test_iss_round_trip_boxes_from_masks(iss_root):
    assert D.detect_format(iss_root) == 'iss'
    ds = D.make_dataset(iss_root, 'val', _identity())
    assert len(ds) == 4 and ds.num_stuff == 1 and ds.num_thing == 10
    assert ds.categories[:3] == ['background', 'person', 'bicycle']
    assert ds.original_ids[:3] == [0, 1, 2]
    with open(os.path.join(iss_root, 'coco', 'val.json')) as f:
        gt = json.load(f)
    crowd_seen = 0
    for i in range(len(ds)):
        rec = ds[i]
        assert rec['size'] == (96, 96) and rec['img'].shape == (3, 96, 96)
        anns = [a for a in gt['annotations'] if a['image_id'] == rec['idx']]
        cat, bbx, iscrowd = rec['cat'], rec['bbx'], rec['iscrowd']
        assert cat[0] == 255 and cat[1] == 0  # void, background stuff
        things = [k for k in range(len(cat)) if cat[k] >= ds.num_stuff and cat[k] != 255]
        assert len(things) == len(anns)
        for k, a in zip(things, anns):
            x, y, w, h = a['bbox']
            assert bbx[k].tolist() == [y, x, y + h, x + w]
            assert int(cat[k]) == a['category_id'] and int(iscrowd[k]) == a['iscrowd']
            # the box is tight around the instance's pixels
            ys, xs = np.nonzero(rec['msk'][0].numpy() == k)
            assert (ys.min(), xs.min(), ys.max() + 1, xs.max() + 1) == tuple(bbx[k].int().tolist())
        crowd_seen += int(iscrowd.sum())
    assert crowd_seen >= 1


def test_iss_metadata_layout(iss_root):
    with open(os.path.join(iss_root, 'metadata.bin'), 'rb') as f:
        meta = msgpack.load(f)
    assert set(meta) == {'meta', 'images'}
    assert set(meta['meta']) == {'num_stuff', 'num_thing', 'categories', 'palette',
                                 'original_ids'}
    first = meta['images'][0]
    assert set(first) == {'id', 'cat', 'size', 'iscrowd'} and first['size'] == [96, 96]
    with open(os.path.join(iss_root, 'lst', 'train.txt')) as f:
        assert f.read().split() == ['train_{:06d}'.format(i) for i in range(1, 7)]
    again = synthetic.write_iss(str(iss_root) + '_again', num_train=6, num_val=4, seed=3,
                                image_size=96, crowd_prob=0.5)
    for name in ('metadata.bin', 'msk/val_000002.png', 'img/train_000001.jpg'):
        with open(os.path.join(iss_root, name), 'rb') as a, \
                open(os.path.join(again, name), 'rb') as b:
            assert a.read() == b.read(), name


def test_coco_categories_contiguous_and_back(coco_root):
    assert D.detect_format(coco_root) == 'coco'
    ds = D.make_dataset(coco_root, 'val2017', ISSTransform(128, 1000))
    assert ds.num_stuff == 0 and ds.num_thing == 80
    assert ds.original_ids[:6] == [1, 2, 3, 4, 5, 6] and ds.original_ids[-1] == 90
    assert ds.original_ids[ds.categories.index('tv')] == 72
    with open(os.path.join(coco_root, 'annotations', 'instances_val2017.json')) as f:
        js = json.load(f)
    for i, image_id in enumerate(ds.img_ids):
        anns = [a for a in js['annotations'] if a['image_id'] == image_id]
        rec = ds[i]
        assert rec['idx'] == image_id
        h, w = rec['size']
        out_h, out_w = rec['img'].shape[1:]
        assert [ds.original_ids[c] for c in rec['cat'].tolist()] == \
            [a['category_id'] for a in anns]
        assert rec['iscrowd'].tolist() == [a['iscrowd'] for a in anns]
        expected = [[a['bbox'][1] * out_h / h, a['bbox'][0] * out_w / w,
                     (a['bbox'][1] + a['bbox'][3]) * out_h / h,
                     (a['bbox'][0] + a['bbox'][2]) * out_w / w] for a in anns]
        assert np.allclose(rec['bbx'].numpy().reshape(-1, 4), np.array(expected).reshape(-1, 4),
                           atol=1e-4)
    assert any(len(ds[i]['cat']) == 0 for i in range(len(ds)))  # empty val image kept


def test_bad_input(tmp_path, coco_root, iss_root):
    with pytest.raises(FileNotFoundError, match='data root .* does not exist'):
        D.detect_format(str(tmp_path / 'nowhere'))
    (tmp_path / 'empty').mkdir()
    with pytest.raises(D.DatasetError, match='neither a seamseg ISS dataset'):
        D.detect_format(str(tmp_path / 'empty'))
    with pytest.raises(D.DatasetError, match='empty split name'):
        D.make_dataset(coco_root, '', ISSTransform(64, 64))
    with pytest.raises(D.DatasetError, match='lst/.*test.txt does not exist'):
        D.make_dataset(iss_root, 'test', ISSTransform(64, 64))
    bad = tmp_path / 'coco'
    shutil.copytree(coco_root, bad)
    ann = bad / 'annotations' / 'instances_train2017.json'
    text = ann.read_text()
    ann.write_text(text[:-10])
    with pytest.raises(D.DatasetError, match='not valid JSON'):
        D.COCODataset(str(bad), 'train2017', ISSTransform(64, 64))
    js = json.loads(text)
    js['annotations'][0]['bbox'][2] = 0
    ann.write_text(json.dumps(js))
    with pytest.raises(D.DatasetError, match=r'annotation id \d+ has bbox'):
        D.COCODataset(str(bad), 'train2017', ISSTransform(64, 64))
    del js['images'][0]['height']
    ann.write_text(json.dumps(js))
    with pytest.raises(D.DatasetError, match=r"lacks \['height'\]"):
        D.COCODataset(str(bad), 'train2017', ISSTransform(64, 64))
    js['images'][0]['height'] = 10
    js['annotations'] = []
    ann.write_text(json.dumps(js))
    with pytest.raises(D.DatasetError, match='no image has a box'):
        D.COCODataset(str(bad), 'train2017', ISSTransform(64, 64))
    broken = tmp_path / 'iss'
    shutil.copytree(iss_root, broken)
    (broken / 'metadata.bin').write_bytes(b'\x92\x01')
    with pytest.raises(D.DatasetError, match='not a seamseg metadata file'):
        D.ISSDataset(str(broken), 'train', ISSTransform(64, 64))
