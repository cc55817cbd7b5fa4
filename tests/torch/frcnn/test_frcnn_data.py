"""ISS and COCO datasets: generator -> dataset round trip, category mapping, bad input."""
import json
import os
import re
import shutil

import numpy as np
import pytest
import torch
import umsgpack

from launch import LOADER_CONTEXT, as_list  # tests/launch.py
from gluontrain.data import synthetic
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
        meta = umsgpack.unpack(f)
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
    with pytest.raises(D.DatasetError, match=r'annotation id \d+ \(image \d+\) has bbox'):
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


def _spoil(path, how):
    """Replace the image at ``path`` by a zero-byte, truncated or text file."""
    data = open(path, 'rb').read()
    with open(path, 'wb') as f:
        f.write({'empty': b'', 'truncated': data[:len(data) // 2],
                 'text': b'not an image\n'}[how])


@pytest.mark.parametrize('how, reason', [('empty', r'is empty \(0 bytes\)'),
                                         ('truncated', r'is truncated \(its data ends early\)'),
                                         ('text', 'is not an image file')])
def test_bad_image_file_is_one_line_naming_it(tmp_path, coco_root, iss_root, how, reason):
    coco = tmp_path / 'coco'
    shutil.copytree(coco_root, coco)
    ds = D.COCODataset(str(coco), 'train2017', _identity())
    path = os.path.join(ds.image_dir, ds._images[1]['file_name'])
    _spoil(path, how)
    with pytest.raises(D.ImageReadError) as e:
        ds[1]
    msg = str(e.value)
    assert '\n' not in msg and msg.startswith('image {} '.format(path))
    assert re.search(reason, msg) and 'image id {} of {}'.format(
        ds._images[1]['id'], ds.annotation_file) in msg and 'restore the file' in msg
    iss = tmp_path / 'iss'
    shutil.copytree(iss_root, iss)
    ds = D.ISSDataset(str(iss), 'train', _identity())
    _spoil(str(iss / 'msk' / (ds._images[0]['id'] + '.png')), how)
    with pytest.raises(D.ImageReadError, match=r'^image .*msk/{}\.png {} \(id {} of .*lst/train'
                       r'\.txt\)'.format(ds._images[0]['id'], reason, ds._images[0]['id'])):
        ds[0]


def test_bad_image_in_a_loader_worker_is_still_one_line(tmp_path, coco_root):
    coco = tmp_path / 'coco'
    shutil.copytree(coco_root, coco)
    ds = D.COCODataset(str(coco), 'train2017', _identity())
    path = os.path.join(ds.image_dir, ds._images[0]['file_name'])
    _spoil(path, 'truncated')
    loader = torch.utils.data.DataLoader(ds, batch_size=1, num_workers=1, collate_fn=as_list,
                                         multiprocessing_context=LOADER_CONTEXT)
    with pytest.raises(ValueError) as e:
        next(iter(loader))
    assert isinstance(e.value, D.ImageReadError)
    assert str(e.value).startswith('image {} is truncated'.format(path))
    assert '\n' not in str(e.value) and 'Traceback' not in str(e.value)


def _coco_json(root):
    path = os.path.join(root, 'annotations', 'instances_train2017.json')
    with open(path) as f:
        return path, json.load(f)


@pytest.mark.parametrize('value', [float('nan'), float('inf')])
def test_coco_non_finite_bbox_is_refused(tmp_path, coco_root, value):
    root = tmp_path / 'coco'
    shutil.copytree(coco_root, root)
    path, js = _coco_json(str(root))
    ann = js['annotations'][2]
    ann['bbox'][1] = value
    with open(path, 'w') as f:
        json.dump(js, f)  # writes NaN / Infinity, which json.load reads back
    with pytest.raises(D.DatasetError, match=r'^{}: annotation id {} \(image {}\) has the '
                       r'non-finite bbox \[.*{}.*\]: write pixel numbers'.format(
                           re.escape(path), ann['id'], ann['image_id'],
                           'nan' if value != value else 'inf')):
        D.COCODataset(str(root), 'train2017', _identity())


def test_coco_box_wholly_outside_is_dropped_with_a_warning(tmp_path, coco_root):
    root = tmp_path / 'coco'
    shutil.copytree(coco_root, root)
    path, js = _coco_json(str(root))
    ann = js['annotations'][0]
    img = next(i for i in js['images'] if i['id'] == ann['image_id'])
    ann['bbox'] = [img['width'] + 5.0, 3.0, 10.0, 10.0]
    with open(path, 'w') as f:
        json.dump(js, f)
    with pytest.warns(UserWarning, match=r'1 box wholly outside its image, dropped: annotation '
                      r'id {} \(image {}'.format(ann['id'], ann['image_id'])):
        ds = D.COCODataset(str(root), 'train2017', _identity())
    k = ds.img_ids.index(ann['image_id'])
    n = sum(a['image_id'] == ann['image_id'] for a in js['annotations'])
    assert len(ds._images[k]['cat']) == n - 1
    for a in js['annotations']:  # every box wholly outside: nothing left to detect
        a['bbox'] = [-50.0, -50.0, 10.0, 10.0]
    with open(path, 'w') as f:
        json.dump(js, f)
    with pytest.warns(UserWarning), pytest.raises(
            D.DatasetError, match=r'no image has a box inside it \({} wholly outside\)'.format(
                len(js['annotations']))):
        D.COCODataset(str(root), 'train2017', _identity())


def test_declared_size_contradicting_the_image_warns(tmp_path, coco_root, iss_root):
    root = tmp_path / 'coco'
    shutil.copytree(coco_root, root)
    path, js = _coco_json(str(root))
    img = js['images'][0]
    true_size = (img['width'], img['height'])
    img['width'] += 7
    with open(path, 'w') as f:
        json.dump(js, f)
    ds = D.COCODataset(str(root), 'train2017', _identity())
    with pytest.warns(UserWarning, match=r'{} is {}x{} but {} \(image id {}\) says {}x{}; its '
                      r'boxes are used as written'.format(
                          img['file_name'], true_size[0], true_size[1], re.escape(path),
                          img['id'], true_size[0] + 7, true_size[1])):
        ds[ds.img_ids.index(img['id'])]
    iss = tmp_path / 'iss'
    shutil.copytree(iss_root, iss)
    with open(iss / 'metadata.bin', 'rb') as f:
        meta = umsgpack.unpack(f)
    desc = meta['images'][0]
    desc['size'] = [desc['size'][0] + 3, desc['size'][1]]
    with open(iss / 'metadata.bin', 'wb') as f:
        umsgpack.dump(meta, f)
    ds = D.ISSDataset(str(iss), 'train', _identity())
    k = [d['id'] for d in ds._images].index(desc['id'])
    with pytest.warns(UserWarning, match=r'{}\.jpg is 96x96 but .*metadata.bin says 96x99'
                      .format(desc['id'])):
        ds[k]


def test_iss_non_finite_size_is_refused(tmp_path, iss_root):
    iss = tmp_path / 'iss'
    shutil.copytree(iss_root, iss)
    with open(iss / 'metadata.bin', 'rb') as f:
        meta = umsgpack.unpack(f)
    meta['images'][1]['size'] = [float('nan'), 96]
    with open(iss / 'metadata.bin', 'wb') as f:
        umsgpack.dump(meta, f)
    with pytest.raises(D.DatasetError, match=r"^{}: image {} has size \[nan, 96\]; it must be "
                       r"the image's \(height, width\)".format(
                           re.escape(str(iss / 'metadata.bin')), meta['images'][1]['id'])):
        D.ISSDataset(str(iss), 'train', _identity())
