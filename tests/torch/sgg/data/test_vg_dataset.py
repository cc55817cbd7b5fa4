"""VGDataset: SGB's splits, filters and targets on hand-built files, the fixed bugs, bad input.

The comparison with SGB's VGDataset runs against the recording ``sgb_data_vg_dataset`` and,
with ``GLUONTRAIN_REFERENCES`` set, live against SGB's source."""
import io
import json
import os
import random
import re
import warnings

import h5py
import numpy as np
import pytest
import torch
from PIL import Image

from fixtures.recorded import SOURCES, Recorder, from_json_array, json_array
from launch import LOADER_CONTEXT, as_list  # tests/launch.py
from gluontrain.data import vg
from gluontrain.torch.sgg.data import VGDataset
from gluontrain.torch.sgg.data.vg_dataset import box_filter

try:
    from . import sgb_reference
    from .conftest import NEAR, ON, A, B, C, TINY, vg_files, write_tiny
except ImportError:  # imported outside the package by tests/fixtures/make_recorded_fixtures.py
    import sgb_reference  # pylint: disable=import-error
    from conftest import (NEAR, ON, A, B, C, TINY, vg_files,  # pylint: disable=import-error
                          write_tiny)

SGB = Recorder('sgb_data_vg_dataset', sgb_reference.load, "SGB's data/datasets/visual_genome.py")


def ids(ds):
    return [info['image_id'] for info in ds.img_info]


def test_splits_and_filters_hand_counts(tiny_root):
    files = vg_files(tiny_root)
    # usable split-0 rows (boxes and relations): 0, 1, 3; row 1 has no overlapping relation
    train = VGDataset('train', num_val_im=0, **files)
    assert ids(train) == [1, 4]
    np.testing.assert_array_equal(train.relationships[0], [[0, 1, ON], [0, 1, NEAR]])
    np.testing.assert_array_equal(train.relationships[1], [[1, 0, ON]])
    assert ids(VGDataset('train', num_val_im=0, filter_non_overlap=False, **files)) == [1, 2, 4]
    assert ids(VGDataset('train', num_val_im=0, filter_empty_rels=False,
                         filter_non_overlap=False, **files)) == [1, 2, 3, 4]
    # the first num_val_im usable rows are val (no overlap filter outside training)
    val = VGDataset('val', num_val_im=2, **files)
    assert ids(val) == [1, 2]
    assert len(val.relationships[0]) == 4
    assert ids(VGDataset('train', num_val_im=2, **files)) == [4]
    assert ids(VGDataset('train', num_val_im=0, num_im=2, **files)) == [1]
    assert ids(VGDataset('test', **files)) == [6]
    assert ids(VGDataset('test', filter_empty_rels=False, **files)) == [6, 7]
    assert val.split_mask.tolist() == [True, True, False, False, False, False, False]


def test_train_split_smaller_than_val_carve_out_is_refused(tiny_root):
    files = vg_files(tiny_root)
    with pytest.raises(ValueError) as e:
        VGDataset('train', num_val_im=3, **files)
    msg = str(e.value)
    assert files['roidb_file'] in msg and 'num_val_im=3' in msg and 'below 3' in msg
    assert len(VGDataset('val', num_val_im=3, **files)) == 3  # val takes them all, as SGB


def test_vocabularies(tiny_root):
    ds = VGDataset('test', **vg_files(tiny_root))
    assert ds.ind_to_classes == ['__background__', 'a', 'b', 'c']
    assert ds.ind_to_predicates == ['__background__', 'on', 'near']
    assert ds.ind_to_attributes == ['__background__', 'red']
    assert ds.categories == {0: '__background__', 1: 'a', 2: 'b', 3: 'c'}
    assert ds.get_img_info(0) == {'width': 512, 'height': 256, 'image_id': 6}


def test_groundtruth_scaled_clipped_and_relation_matrix(tiny_root):
    ds = VGDataset('train', num_val_im=0, **vg_files(tiny_root))
    # row 3: 1024-scale boxes * 512 / 1024; the third lies at x = 515..550 > W - 1 = 511
    target = ds.get_groundtruth(1)
    assert target.bbox.dtype == torch.float32 and target.size == (512, 256)
    torch.testing.assert_close(target.bbox, torch.tensor([[0., 0, 100, 100], [50, 50, 150, 150]]))
    assert target.get_field('labels').tolist() == [B, C]
    assert target.get_field('attributes').shape == (2, 10)
    assert target.get_field('relation').tolist() == [[0, 0], [ON, 0]]
    assert 'relation_tuple' not in target.fields()
    ev = ds.get_groundtruth(1, evaluation=True)
    torch.testing.assert_close(ev.bbox[2], torch.tensor([511., 0, 511, 50]))
    assert ev.get_field('labels').tolist() == [B, C, A]
    assert ev.get_field('relation_tuple').tolist() == [[1, 0, ON]]
    assert ev.get_field('relation').shape == (3, 3)


def test_duplicate_pairs_keep_one_random_predicate_in_training(tiny_root):
    files = vg_files(tiny_root)
    train = VGDataset('train', num_val_im=0, **files)
    seen = set()
    for seed in range(12):
        np.random.seed(seed)
        rel = train.get_groundtruth(0).get_field('relation')
        assert int((rel > 0).sum()) == 1
        seen.add(int(rel[0, 1]))
        np.random.seed(seed)
        assert len(train.get_groundtruth(0, evaluation=True).get_field('relation_tuple')) == 1
    assert seen == {ON, NEAR}
    # outside training every annotation stays; the matrix keeps a random one per pair
    val = VGDataset('val', num_val_im=2, **files)
    assert val.get_groundtruth(0, evaluation=True).get_field('relation_tuple').tolist() == \
        [list(r) for r in TINY[0]['rels']]
    picked = set()
    for seed in range(12):
        random.seed(seed)
        picked.add(int(val.get_groundtruth(0).get_field('relation')[0, 1]))
    assert picked == {ON, NEAR}
    test = VGDataset('test', **files)
    ev = test.get_groundtruth(0, evaluation=True)
    assert ev.get_field('relation_tuple').tolist() == [[1, 0, ON], [1, 0, ON]]
    assert ev.get_field('relation').tolist() == [[0, 0], [ON, 0]]


def test_flipped_image_gets_flipped_training_target(tiny_root):
    """SGB passed flip_img as `evaluation`: unflipped boxes with evaluation fields."""
    files = vg_files(tiny_root)
    ds = VGDataset('train', num_val_im=0, flip_aug=True, **files)
    random.seed(0)
    assert random.random() > 0.5  # the draw __getitem__ makes after this seed: flip
    random.seed(0)
    img, target, index = ds[0]
    assert index == 0 and 'relation_tuple' not in target.fields()
    # x -> W - x on the image-scale boxes [0,0,50,50], [25,25,75,75], [250,0,300,50], then
    # clipped to W - 1
    torch.testing.assert_close(target.bbox, torch.tensor([[462., 0, 511, 50], [437, 25, 487, 75],
                                                          [212, 0, 262, 50]]))
    original = Image.open(os.path.join(files['img_dir'], '1.jpg')).convert('RGB')
    assert np.array_equal(np.asarray(img), np.asarray(original)[:, ::-1])
    random.seed(1)
    assert random.random() <= 0.5
    random.seed(1)
    _, target, _ = ds[0]
    torch.testing.assert_close(target.bbox, torch.tensor([[0., 0, 50, 50], [25, 25, 75, 75],
                                                          [250, 0, 300, 50]]))
    # no flip outside training, whatever flip_aug says
    test = VGDataset('test', flip_aug=True, **files)
    random.seed(0)
    torch.testing.assert_close(test[0][1].bbox, torch.tensor([[0., 0, 50, 50], [0, 0, 25, 25]]))


def test_matches_load_vg_on_generated_data(gen_root):
    ds = VGDataset('train', num_val_im=2, **vg_files(gen_root))
    ref = vg.load_vg(gen_root, 'train', num_val_im=2, filter_non_overlap=True)
    assert ids(ds) == [r['image_id'] for r in ref] and len(ds) > 5
    for k, r in enumerate(ref):
        np.testing.assert_array_equal(ds.relationships[k], r['relations'])
        target = ds.get_groundtruth(k, evaluation=True)
        scale = max(r['width'], r['height']) / 1024.0
        # SGB's arithmetic (box / 1024 * max side) equals load_vg's (box * scale) exactly
        np.testing.assert_array_equal(
            target.bbox.numpy(), np.minimum(ds.gt_boxes[k] / 1024.0 * max(r['width'], r['height']),
                                            [[r['width'] - 1, r['height'] - 1] * 2]
                                            ).astype(np.float32))
        np.testing.assert_allclose(ds.gt_boxes[k] * scale, r['boxes'])
    assert ids(VGDataset('test', **vg_files(gen_root))) == [
        r['image_id'] for r in vg.load_vg(gen_root, 'test')]


def test_custom_images(tmp_path):
    root = write_tiny(str(tmp_path / 'd'))
    folder = tmp_path / 'custom'
    folder.mkdir()
    for i, size in enumerate([(30, 20), (10, 40)]):
        Image.new('RGB', size).save(str(folder / '{}.jpg'.format(i)))
    ds = VGDataset('test', custom_eval=True, custom_path=str(folder), **vg_files(root))
    assert len(ds) == 2
    assert sorted((i['width'], i['height']) for i in ds.img_info) == [(10, 40), (30, 20)]
    img, target, index = ds[1]
    assert target.tolist() == [-1] and index == 1 and img.size in ((30, 20), (10, 40))


def test_box_filter_pairs():
    boxes = np.array([[0, 0, 10, 10], [5, 5, 15, 15], [20, 20, 30, 30]])
    assert box_filter(boxes, must_overlap=True).tolist() == [[0, 1], [1, 0]]
    assert len(box_filter(boxes, must_overlap=False)) == 6
    # touching edges do not overlap (exclusive): every ordered pair is a candidate
    apart = np.array([[0, 0, 10, 10], [10, 0, 20, 10]])
    assert box_filter(apart, must_overlap=True).tolist() == [[0, 1], [1, 0]]


# -- bad input ---------------------------------------------------------------------------------
def test_misaligned_image_data_names_both_files_and_the_first_mismatch(tmp_path):
    # an extra portrait entry at position 1: h5 row 1's boxes (x up to 300 at the 1024
    # scale) do not fit its 1024-scale width of 256
    root = write_tiny(str(tmp_path / 'd'), image_data_extra=[
        (1, {'width': 100, 'height': 400, 'image_id': 99})])
    files = vg_files(root)
    with pytest.raises(ValueError) as e:
        VGDataset('train', num_val_im=0, **files)
    msg = str(e.value)
    assert files['image_file'] in msg and files['roidb_file'] in msg
    assert 'First mismatch: h5 image row 1 ' in msg and '8 entries' in msg
    assert '7 image rows' in msg


def test_sgb_corrupted_entries_are_dropped_to_align(tmp_path):
    root = write_tiny(str(tmp_path / 'd'), image_data_extra=[
        (2, {'width': 800, 'height': 600, 'image_id': 1592})])
    assert ids(VGDataset('train', num_val_im=0, **vg_files(root))) == [1, 4]


def test_missing_entry_in_generated_image_data(gen_root, tmp_path):
    import shutil
    root = shutil.copytree(gen_root, str(tmp_path / 'g'))
    path = os.path.join(root, vg.IMAGE_DATA)
    with open(path) as f:
        data = json.load(f)
    del data[5]
    with open(path, 'w') as f:
        json.dump(data, f)
    with pytest.raises(ValueError, match='21 entries .* but .* has 22 image rows.*First mismatch: '
                       'h5 image row [56] '):
        VGDataset('test', **vg_files(root))


def test_missing_image_is_named(tiny_root):
    os.remove(os.path.join(tiny_root, vg.IMAGE_DIR, '4.jpg'))
    with pytest.raises(FileNotFoundError, match=r'4\.jpg \(h5 row 3\) is missing'):
        VGDataset('train', num_val_im=0, **vg_files(tiny_root))
    VGDataset('test', **vg_files(tiny_root))  # other splits do not need it


def test_missing_dict_file_is_named(tiny_root):
    files = vg_files(tiny_root)
    os.remove(files['dict_file'])
    with pytest.raises(FileNotFoundError) as e:
        VGDataset('train', **files)
    assert files['dict_file'] in str(e.value) and 'dict_file' in str(e.value)


def test_relation_pointing_outside_its_image_is_named(tiny_root):
    files = vg_files(tiny_root)
    with h5py.File(files['roidb_file'], 'a') as f:
        rels = f['relationships'][:]
        rels[0] = [0, 5]  # global box 5 belongs to image row 3
        f['relationships'][...] = rels
    with pytest.raises(ValueError) as e:
        VGDataset('test', **files)
    msg = str(e.value)
    assert files['roidb_file'] in msg and 'image #0' in msg and 'points outside' in msg


def test_bad_split_name(tiny_root):
    with pytest.raises(ValueError, match="'train', 'val' or 'test'"):
        VGDataset('training', **vg_files(tiny_root))


def _targets(dataset):
    """``{'{i}/{evaluation}{flip}': {'bbox', 'fields', 'field': {...}}}`` of every
    ``get_groundtruth(i, evaluation, flip)``, NumPy and Python ``random`` seeded with ``i``
    before each call (the random predicate kept of duplicate pairs)."""
    out = {}
    for i in range(len(dataset)):
        for evaluation in (False, True):
            for flip in (False, True):
                np.random.seed(i)
                random.seed(i)
                target = dataset.get_groundtruth(i, evaluation, flip)
                out['%d/%d%d' % (i, evaluation, flip)] = {
                    'bbox': target.bbox, 'fields': json_array(target.fields()),
                    'field': {k: target.get_field(k) for k in target.fields()}}
    return out


def _describe(dataset, img_dir):
    """What the comparison reads off a VGDataset: file names (relative to ``img_dir``),
    img_info and every target."""
    return {'filenames': json_array([os.path.relpath(f, img_dir) for f in dataset.filenames]),
            'img_info': json_array(dataset.img_info), 'targets': _targets(dataset)}


@SGB.case
def visual_genome(sgb):
    """SGB's VGDataset (its 108073 asserts removed) on the ``gen_root`` dataset: each split's
    files, img_info and targets (:func:`_targets`), and the vocabularies."""
    tmp = sgb_reference.generated_vg()
    files = vg_files(tmp.name)
    out = {}
    try:
        with warnings.catch_warnings():  # SGB's np.float/np.bool
            warnings.simplefilter('ignore', DeprecationWarning)
            for split in ('train', 'val', 'test'):
                ref = sgb.visual_genome.VGDataset(split, num_val_im=4, **files)
                out[split] = _describe(ref, files['img_dir'])
    finally:
        tmp.cleanup()
    for k in ('ind_to_classes', 'ind_to_predicates', 'categories'):
        out[k] = json_array(getattr(ref, k))
    return out


def _same_tensor(arr, tensor):
    """A recorded array equals a tensor: dtype, shape and values."""
    ref = torch.from_numpy(np.asarray(arr))
    return ref.dtype == tensor.dtype and torch.equal(ref, tensor)


@pytest.mark.parametrize('source', SOURCES)
def test_same_as_sgb_visual_genome(gen_root, source):
    """SGB's VGDataset (its 108073 asserts removed) on the same files: same images per split,
    same targets for every (evaluation, flip_img) under the same seeds (recorded, and live
    from the mirror)."""
    ref = SGB.outputs('visual_genome', source)
    files = vg_files(gen_root)
    for split in ('train', 'val', 'test'):
        ours = VGDataset(split, num_val_im=4, **files)
        mine = _describe(ours, files['img_dir'])
        assert len(ours) > 0
        for k in ('filenames', 'img_info'):
            assert from_json_array(ref[split + '/' + k]) == \
                from_json_array(mine[k]), (split, k)
        theirs = {k[len(split) + 9:]: v for k, v in ref.items()
                  if k.startswith(split + '/targets/')}
        got = {k: v for k, v in flatten_targets(mine['targets']).items()}
        assert sorted(theirs) == sorted(got), split
        for k, v in got.items():
            if k.endswith('/fields'):
                assert from_json_array(theirs[k]) == from_json_array(v), k
            else:
                assert _same_tensor(theirs[k], v), (split, k)
    for k in ('ind_to_classes', 'ind_to_predicates', 'categories'):
        assert from_json_array(ref[k]) == json.loads(json.dumps(getattr(ours, k))), k


def flatten_targets(targets):
    """``{key: tensor or text}`` of :func:`_targets` with '/'-joined keys (tensors kept)."""
    out = {}
    for key, target in targets.items():
        out[key + '/bbox'] = target['bbox']
        out[key + '/fields'] = target['fields']
        for name, value in target['field'].items():
            out['%s/field/%s' % (key, name)] = value
    return out


@pytest.mark.parametrize('content, reason', [(b'', r'is empty \(0 bytes\)'),
                                             (b'GIF89a\x01', 'cannot be decoded|is not an image'),
                                             (b'plain text', 'is not an image file')])
def test_unreadable_image_is_one_line_naming_it(tiny_root, content, reason):
    files = vg_files(tiny_root)
    ds = VGDataset('test', **files)
    with open(ds.filenames[0], 'wb') as f:
        f.write(content)
    with pytest.raises(ValueError) as e:
        ds[0]
    msg = str(e.value)
    assert '\n' not in msg and msg.startswith('image {} '.format(ds.filenames[0]))
    assert re.search(reason, msg) and 'image_id 6 of {}'.format(files['image_file']) in msg


def test_truncated_image_in_a_loader_worker_is_one_line(tiny_root):
    ds = VGDataset('test', **vg_files(tiny_root))
    buf = io.BytesIO()
    Image.new('RGB', (512, 256), (200, 10, 10)).save(buf, format='JPEG')
    with open(ds.filenames[0], 'wb') as f:
        f.write(buf.getvalue()[:len(buf.getvalue()) // 2])
    loader = torch.utils.data.DataLoader(ds, num_workers=1, collate_fn=as_list,
                                         multiprocessing_context=LOADER_CONTEXT)
    with pytest.raises(ValueError) as e:
        next(iter(loader))
    assert str(e.value) == (
        'image {} is truncated (its data ends early) (image_id 6 of {}): restore the file '
        '(re-encode or re-download it), or remove the image from its dataset'.format(
            ds.filenames[0], ds.image_file))


def test_non_finite_h5_box_is_refused_naming_the_image(tiny_root):
    files = vg_files(tiny_root)
    with h5py.File(files['roidb_file'], 'a') as f:
        boxes = f['boxes_1024'][:].astype(np.float32)
        boxes[4, 2] = np.nan  # box 4 is the second box of image row 1 (image_id 2)
        del f['boxes_1024']
        f['boxes_1024'] = boxes
    with pytest.raises(ValueError, match=r'{}: boxes_1024 row 4 \(image #1 \(image_id 2\)\) = '
                       r'\[.*nan.*\] is not finite'.format(re.escape(files['roidb_file']))):
        VGDataset('test', **files)


def test_training_image_with_every_box_outside_is_refused(tiny_root):
    files = vg_files(tiny_root)
    # the hand-built box 2 of image_id 4 lies right of its image: named, then dropped
    with pytest.warns(UserWarning, match=r'1 box of the train split lies wholly outside its '
                      r'image \(image_id 4 \(h5 row 3\) box #2\); training drops them'):
        VGDataset('train', num_val_im=0, **files)
    with h5py.File(files['roidb_file'], 'a') as f:
        boxes = f['boxes_1024'][:]
        boxes[0:3, 0] += 1100  # every box of image_id 1 moves right of the image
        f['boxes_1024'][...] = boxes
    with pytest.raises(ValueError, match=r'every box of 1 training image lies outside its image '
                       r'\(image_id 1 \(h5 row 0\)\), so nothing is left to train on'):
        VGDataset('train', num_val_im=0, **files)
    with pytest.warns(UserWarning, match='evaluation keeps them'):
        VGDataset('val', num_val_im=0, **files)  # evaluation keeps them, as SGB


def test_empty_train_split_does_not_advise_a_negative_num_val_im(tiny_root):
    files = vg_files(tiny_root)
    with h5py.File(files['roidb_file'], 'a') as f:
        f['split'][...] = 2  # every image in the test split
    with pytest.raises(ValueError) as e:
        VGDataset('train', num_val_im=2, **files)
    msg = str(e.value)
    assert msg.startswith('{} has no usable train-split image (split == 0, with boxes and '
                          'relationships): the train split is empty'.format(files['roidb_file']))
    assert 'below 0' not in msg and 'make_synthetic_data.py vg --root DIR' in msg


def test_missing_file_hint_gives_the_generator_its_root(tiny_root):
    files = vg_files(tiny_root)
    os.remove(files['roidb_file'])
    with pytest.raises(FileNotFoundError, match='make_synthetic_data.py vg --root DIR'):
        VGDataset('test', **files)


def test_split_left_empty_by_the_filters_is_named(tiny_root):
    files = vg_files(tiny_root)
    with h5py.File(files['roidb_file'], 'a') as f:
        f['img_to_first_rel'][5] = -1  # the only test image with relationships loses them
        f['img_to_last_rel'][5] = -1
    with pytest.raises(ValueError, match=r"^the test split of {} is empty: no image is left "
                       r"after SGB's filters \(split == 2, with boxes, with relationships\)"
                       .format(re.escape(files['roidb_file']))):
        VGDataset('test', **files)
    assert len(VGDataset('test', filter_empty_rels=False, **files)) == 2
