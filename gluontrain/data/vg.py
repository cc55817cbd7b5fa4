"""Visual Genome scene graphs in the layout Scene-Graph-Benchmark.pytorch reads: the h5, the
dictionaries json, ``image_data.json`` and ``VG_100K/<image_id>.jpg`` under ``root``, as
docs/datasets.md, "Formats" ("Visual Genome (SGB)") describes them. The images and their
scene graphs are drawn by :mod:`gluontrain.data.vg_scenes` (shapes in colours; predicates by
fixed rules from the boxes, see its :func:`predicate`)."""
import json
import os

import numpy as np

from ._io import install, save_jpeg, staging_dir, write_json
from .vg_checks import DICTS_NAME, H5_NAME, IMAGE_DATA, IMAGE_DIR, check_vg
from .vg_scenes import ATTRIBUTES, OBJECT_CLASSES, PREDICATES, draw_scene, predicate

__all__ = ['OBJECT_CLASSES', 'PREDICATES', 'ATTRIBUTES', 'H5_NAME', 'DICTS_NAME', 'IMAGE_DATA',
           'IMAGE_DIR', 'predicate', 'encode_box', 'write_vg', 'load_vg', 'load_vg_vocab',
           'load_graphs']


_TAG_VG = 7003
_MAX_ATTRIBUTES = 10
_BOX_SCALES = (1024, 512)


def encode_box(box, width, height, size):
    """Encode a pixel box the way the VG-SGG preprocessing does.

    The box is rescaled so the longer image side is ``size``; the corner is floored, the
    extent ceiled, both clamped to ``size``, and the result stored as int32
    ``(x + floor(w / 2), y + floor(h / 2), w, h)``.

    Parameters
    ----------
    box : sequence of 4 int
        ``(x1, y1, x2, y2)`` exclusive pixel box.
    width, height : int
        Image size.
    size : int
        Target long side (1024 or 512).

    Returns
    -------
    numpy.ndarray
        ``(4,)`` int32 ``(cx, cy, w, h)``.
    """
    scale = float(size) / max(width, height)
    x, y = int(np.floor(scale * box[0])), int(np.floor(scale * box[1]))
    w, h = int(np.ceil(scale * (box[2] - box[0]))), int(np.ceil(scale * (box[3] - box[1])))
    x, y = min(max(x, 0), size - 2), min(max(y, 0), size - 2)
    w, h = min(w, size - x), min(h, size - y)
    return np.array([x + w // 2, y + h // 2, w, h], dtype=np.int32)


def _index(names):
    return {name: i + 1 for i, name in enumerate(names)}


def write_vg(root, num_train=100, num_val=25, seed=0, image_size=(192, 288)):
    """Write a Visual-Genome scene-graph dataset (SGB's ``VG_stanford_filtered_with_attribute``).

    Parameters
    ----------
    root : str
        Output folder; gets ``VG-SGG-with-attri.h5``, ``VG-SGG-dicts-with-attri.json``,
        ``image_data.json`` and ``VG_100K/``. Existing ones are replaced (the h5 last).
    num_train, num_val : int
        Images with ``split`` 0 (train) and 2 (test), in that order; image ids are 1, 2, ...
    seed : int
        Random seed; identical arguments give byte-identical files.
    image_size : int or (int, int)
        Fixed image side, or an inclusive ``(min, max)`` range for width and height.

    Returns
    -------
    str
        ``root``.
    """
    import h5py  # pylint: disable=import-outside-toplevel

    num_train, num_val = int(num_train), int(num_val)
    if num_train < 0 or num_val < 0:
        raise ValueError('num_train and num_val must be >= 0')
    root = os.path.abspath(os.path.expanduser(root))
    label_idx, pred_idx, attr_idx = _index(OBJECT_CLASSES), _index(PREDICATES), _index(ATTRIBUTES)
    counts = {'object': dict.fromkeys(OBJECT_CLASSES, 0),
              'predicate': dict.fromkeys(PREDICATES, 0),
              'attribute': dict.fromkeys(ATTRIBUTES, 0)}
    cols = {k: [] for k in ('labels', 'attributes', 'relationships', 'predicates',
                            'img_to_first_box', 'img_to_last_box', 'img_to_first_rel',
                            'img_to_last_rel')}
    boxes = {size: [] for size in _BOX_SCALES}
    image_data = []
    with staging_dir(root, 'vg') as tmp:
        os.makedirs(os.path.join(tmp, IMAGE_DIR))
        for i in range(num_train + num_val):
            image_id = i + 1
            rng = np.random.default_rng([seed, _TAG_VG, i])
            image, width, height, objects, rels = draw_scene(rng, image_size)
            save_jpeg(image, os.path.join(tmp, IMAGE_DIR, '{}.jpg'.format(image_id)))
            image_data.append({'width': width, 'url': 'https://gluontrain.invalid/{}/{}.jpg'
                               .format(IMAGE_DIR, image_id), 'height': height,
                               'image_id': image_id, 'coco_id': None, 'flickr_id': None})
            first = len(cols['labels'])
            for obj in objects:
                cols['labels'].append([label_idx[obj['label']]])
                row = [attr_idx[a] for a in obj['attributes']]
                cols['attributes'].append(row + [0] * (_MAX_ATTRIBUTES - len(row)))
                for size in _BOX_SCALES:
                    boxes[size].append(encode_box(obj['box'], width, height, size))
                counts['object'][obj['label']] += 1
                for a in obj['attributes']:
                    counts['attribute'][a] += 1
            cols['img_to_first_box'].append(first if objects else -1)
            cols['img_to_last_box'].append(len(cols['labels']) - 1 if objects else -1)
            first_rel = len(cols['predicates'])
            for sub, obj, pred in rels:
                cols['relationships'].append([first + sub, first + obj])  # global box indices
                cols['predicates'].append([pred_idx[pred]])
                counts['predicate'][pred] += 1
            cols['img_to_first_rel'].append(first_rel if rels else -1)
            cols['img_to_last_rel'].append(len(cols['predicates']) - 1 if rels else -1)
        dicts = {
            'object_count': counts['object'],
            'idx_to_label': {str(v): k for k, v in label_idx.items()},
            'predicate_to_idx': pred_idx,
            'predicate_count': counts['predicate'],
            'idx_to_predicate': {str(v): k for k, v in pred_idx.items()},
            'label_to_idx': label_idx,
            'attribute_count': counts['attribute'],
            'idx_to_attribute': {str(v): k for k, v in attr_idx.items()},
            'attribute_to_idx': attr_idx,
        }
        write_json(os.path.join(tmp, DICTS_NAME), dicts)
        write_json(os.path.join(tmp, IMAGE_DATA), image_data)
        # dtypes and shapes of the released file
        arrays = [
            ('active_object_mask', np.ones((len(cols['labels']), 1), dtype=bool)),
            ('attributes', np.array(cols['attributes'], np.int64).reshape(-1, _MAX_ATTRIBUTES)),
            ('boxes_1024', np.array(boxes[1024], np.int32).reshape(-1, 4)),
            ('boxes_512', np.array(boxes[512], np.int32).reshape(-1, 4)),
            ('img_to_first_box', np.array(cols['img_to_first_box'], np.int32)),
            ('img_to_first_rel', np.array(cols['img_to_first_rel'], np.int32)),
            ('img_to_last_box', np.array(cols['img_to_last_box'], np.int32)),
            ('img_to_last_rel', np.array(cols['img_to_last_rel'], np.int32)),
            ('labels', np.array(cols['labels'], np.int64).reshape(-1, 1)),
            ('predicates', np.array(cols['predicates'], np.int64).reshape(-1, 1)),
            ('relationships', np.array(cols['relationships'], np.int32).reshape(-1, 2)),
            ('split', np.array([0] * num_train + [2] * num_val, np.int32)),
        ]
        # h5py stores no timestamps with track_times=False, so the file is reproducible.
        with h5py.File(os.path.join(tmp, H5_NAME), 'w', track_order=False) as f:
            for name, data in arrays:
                f.create_dataset(name, data=data, track_times=False)
        names = (IMAGE_DIR, IMAGE_DATA, DICTS_NAME, H5_NAME)
        install(tmp, [(os.path.join(tmp, n), os.path.join(root, n)) for n in names],
                remove_first=[os.path.join(root, H5_NAME)])
    return root


def load_vg_vocab(root):
    """Class, predicate and attribute names by index, with ``'__background__'`` at 0.

    Parameters
    ----------
    root : str
        Dataset folder.

    Returns
    -------
    dict
        ``{'classes': [...], 'predicates': [...], 'attributes': [...]}``.
    """
    with open(os.path.join(root, DICTS_NAME)) as f:
        info = json.load(f)
    out = {}
    for key, field in (('classes', 'label_to_idx'), ('predicates', 'predicate_to_idx'),
                       ('attributes', 'attribute_to_idx')):
        mapping = dict(info[field], __background__=0)
        out[key] = sorted(mapping, key=lambda k, m=mapping: m[k])
    return out


def load_vg(root, split='train', num_val_im=0, filter_empty_rels=True, filter_non_overlap=False,
            box_scale=1024):
    """Read the scene graphs of one split, as Scene-Graph-Benchmark's ``load_graphs`` does.

    Parameters
    ----------
    root : str
        Dataset folder (see :func:`write_vg`).
    split : {'train', 'val', 'test'}
        ``test`` is ``split == 2``; ``train``/``val`` share ``split == 0``, of which the first
        ``num_val_im`` images are ``val`` and the rest ``train``.
    num_val_im : int
        Size of the val carve-out (SGB's default is 5000; 0 keeps all for both).
    filter_empty_rels : bool
        Drop images without relationships.
    filter_non_overlap : bool
        Keep only relationships whose boxes intersect (SGB's ``+1`` pixel convention) and
        drop images left with none; SGB does this for ``train``.
    box_scale : int
        Which ``boxes_<scale>`` array to read (SGB uses 1024).

    Returns
    -------
    list of dict
        Per image: ``image_id``, ``file_name`` (path), ``width``, ``height``, ``boxes``
        (float ``(n, 4)`` x1y1x2y2 at image scale), ``labels`` (``(n,)``), ``attributes``
        (``(n, 10)``), ``relations`` (``(r, 3)`` subject, object, predicate; box indices local
        to the image).

    Raises
    ------
    gluontrain.data.checks.DatasetError
        When the files are missing or inconsistent (:func:`~gluontrain.data.vg_checks.check_vg`),
        naming the file and the fix.
    """
    if split not in ('train', 'val', 'test'):
        raise ValueError("split must be 'train', 'val' or 'test', got {!r}".format(split))
    # index ranges the slicing below would silently misread (last < first gives no boxes);
    # the images themselves are opened by the dataset, which names a broken one
    check_vg(root, check_images=False)
    with open(os.path.join(root, IMAGE_DATA)) as f:
        image_data = json.load(f)
    mask, boxes, labels, attributes, relations = load_graphs(
        os.path.join(root, H5_NAME), split, num_val_im=num_val_im,
        filter_empty_rels=filter_empty_rels, filter_non_overlap=filter_non_overlap,
        box_scale=box_scale)
    out = []
    for k, i in enumerate(np.flatnonzero(mask)):
        info = image_data[i]
        scale = max(info['width'], info['height']) / float(box_scale)
        out.append({'image_id': info['image_id'],
                    'file_name': os.path.join(root, IMAGE_DIR, '{}.jpg'.format(info['image_id'])),
                    'width': info['width'], 'height': info['height'],
                    'boxes': boxes[k].astype(np.float64) * scale, 'labels': labels[k],
                    'attributes': attributes[k], 'relations': relations[k]})
    return out


def load_graphs(roidb_file, split, num_im=-1, num_val_im=0, filter_empty_rels=True,
                filter_non_overlap=False, box_scale=1024):
    """Scene-Graph-Benchmark's ``load_graphs``: the boxes and relations of one split.

    Parameters
    ----------
    roidb_file : str
        ``VG-SGG-with-attri.h5`` (validate it first: ``vg_checks.check_vg_files``).
    split : {'train', 'val', 'test'}
        ``test`` is ``split == 2``; ``train``/``val`` share ``split == 0``.
    num_im : int
        Keep the first ``num_im`` images of the split before the val carve-out (-1: all).
    num_val_im : int
        The first ``num_val_im`` images are ``val``, the rest ``train`` (0: no carve-out).
    filter_empty_rels : bool
        Drop images without relationships.
    filter_non_overlap : bool
        Keep relationships whose boxes intersect (``+1`` pixel convention); drop images left
        with none.
    box_scale : int
        Which ``boxes_<scale>`` array to read.

    Returns
    -------
    split_mask : numpy.ndarray
        ``(num_h5_images,)`` bool, the h5 rows kept, in order.
    boxes : list of numpy.ndarray
        Per kept image ``(n, 4)`` int32 ``x1y1x2y2`` at ``box_scale`` (the centre-to-corner
        conversion truncates in the stored integer dtype, as SGB's in-place update does).
    gt_classes : list of numpy.ndarray
        ``(n,)`` labels.
    gt_attributes : list of numpy.ndarray
        ``(n, 10)`` attribute indices (0 = none).
    relationships : list of numpy.ndarray
        ``(r, 3)`` int64 ``(subject, object, predicate)`` with box indices local to the image.
    """
    import h5py  # pylint: disable=import-outside-toplevel

    with h5py.File(roidb_file, 'r') as f:
        d = {k: f[k][:] for k in ('split', 'img_to_first_box', 'img_to_last_box',
                                  'img_to_first_rel', 'img_to_last_rel', 'labels',
                                  'attributes', 'relationships', 'predicates')}
        all_boxes = f['boxes_{}'.format(box_scale)][:]
    split_mask = d['split'] == (2 if split == 'test' else 0)
    split_mask &= d['img_to_first_box'] >= 0
    if filter_empty_rels:
        split_mask &= d['img_to_first_rel'] >= 0
    index = np.flatnonzero(split_mask)
    if num_im > -1:
        index = index[:num_im]
    if num_val_im > 0:
        index = index[:num_val_im] if split == 'val' else (
            index[num_val_im:] if split == 'train' else index)
    split_mask = np.zeros(len(d['split']), dtype=bool)
    split_mask[index] = True
    all_boxes[:, :2] = all_boxes[:, :2] - all_boxes[:, 2:] / 2
    all_boxes[:, 2:] = all_boxes[:, :2] + all_boxes[:, 2:]
    boxes, gt_classes, gt_attributes, relationships = [], [], [], []
    for i in index:
        first, last = d['img_to_first_box'][i], d['img_to_last_box'][i]
        boxes_i = all_boxes[first:last + 1]
        if d['img_to_first_rel'][i] >= 0:
            r0, r1 = d['img_to_first_rel'][i], d['img_to_last_rel'][i] + 1
            rels = np.column_stack((d['relationships'][r0:r1] - first,
                                    d['predicates'][r0:r1, 0])).astype(np.int64)
        else:
            rels = np.zeros((0, 3), dtype=np.int64)
        if filter_non_overlap:
            a, b = boxes_i[rels[:, 0]], boxes_i[rels[:, 1]]
            wh = np.minimum(a[:, 2:], b[:, 2:]) - np.maximum(a[:, :2], b[:, :2]) + 1
            rels = rels[(wh.clip(min=0).prod(1)) > 0]
            if not len(rels):
                split_mask[i] = False
                continue
        boxes.append(boxes_i)
        gt_classes.append(d['labels'][first:last + 1, 0])
        gt_attributes.append(d['attributes'][first:last + 1])
        relationships.append(rels)
    return split_mask, boxes, gt_classes, gt_attributes, relationships
