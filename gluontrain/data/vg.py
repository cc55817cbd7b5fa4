"""Visual Genome scene graphs in the layout Scene-Graph-Benchmark.pytorch reads.

Files under ``root``:

* ``VG-SGG-with-attri.h5``: the concatenated boxes/labels/attributes of all images and their
  relationships, indexed per image by inclusive ``img_to_first_*``/``img_to_last_*`` ranges
  (``-1`` when an image has none). Boxes are int32 ``(cx, cy, w, h)`` rescaled so that the
  image's longer side is 1024 (``boxes_1024``) or 512 (``boxes_512``); relationships hold
  global box indices. ``split`` is 0 for train and 2 for test.
* ``VG-SGG-dicts-with-attri.json``: label/predicate/attribute vocabularies (index 0 is the
  implicit background, keys of the ``idx_to_*`` maps are strings) and their counts.
* ``image_data.json``: one entry per h5 image, same order.
* ``VG_100K/<image_id>.jpg``.

Objects are shapes (the class) in a random colour (an attribute, as are ``small`` and
``large``). Predicates follow from the boxes and the drawing order by fixed rules (see
:func:`predicate`), so a relation model can learn them.
"""
import json
import os

import numpy as np

from . import shapes
from ._io import install, save_jpeg, staging_dir, write_json
from .vg_checks import DICTS_NAME, H5_NAME, IMAGE_DATA, IMAGE_DIR, check_vg

__all__ = ['OBJECT_CLASSES', 'PREDICATES', 'ATTRIBUTES', 'H5_NAME', 'DICTS_NAME', 'IMAGE_DATA',
           'IMAGE_DIR', 'predicate', 'encode_box', 'write_vg', 'load_vg', 'load_vg_vocab',
           'load_graphs']


# Vocabularies are indexed 1.. in sorted order, as the original preprocessing does.
OBJECT_CLASSES = tuple(sorted(shapes.SHAPES))
ATTRIBUTES = tuple(sorted([name for name, _ in shapes.COLOURS] + ['large', 'small']))
PREDICATES = ('above', 'behind', 'below', 'far from', 'has', 'in', 'in front of', 'left of',
              'near', 'on', 'right of', 'under')
_INVERSE = {'in': 'has', 'on': 'under', 'in front of': 'behind', 'above': 'below',
            'left of': 'right of', 'near': 'near', 'far from': 'far from'}
_INVERSE.update({v: k for k, v in list(_INVERSE.items())})

_TAG_VG = 7003
_MAX_ATTRIBUTES = 10
_BOX_SCALES = (1024, 512)


def predicate(a, b, a_on_top, width, height):
    """The predicate of the ordered pair (subject ``a``, object ``b``).

    Rules, first match wins (boxes are exclusive pixel boxes at image scale):

    1. ``in`` / ``has``: one box lies inside the other (subject inside -> ``in``).
    2. ``on`` / ``under``: the subject's bottom edge sits in the top band of the object's box
       (``b.y1 <= a.y2 <= b.y1 + max(4, a.h / 5)``, subject top above it) with the subject's
       horizontal centre over the object.
    3. ``in front of`` / ``behind``: the boxes intersect; the one drawn later is in front.
    4. ``above`` / ``below``: the x-ranges overlap.
    5. ``left of`` / ``right of``: the y-ranges overlap.
    6. ``near`` if the gap between the boxes is under 12 % of the longer image side, else
       ``far from``.

    Parameters
    ----------
    a, b : sequence of 4 int
        Subject and object boxes ``(x1, y1, x2, y2)``.
    a_on_top : bool
        Whether the subject was drawn after the object.
    width, height : int
        Image size.

    Returns
    -------
    str
        One of :data:`PREDICATES`.
    """
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    if ax1 >= bx1 and ay1 >= by1 and ax2 <= bx2 and ay2 <= by2:
        return 'in'
    if bx1 >= ax1 and by1 >= ay1 and bx2 <= ax2 and by2 <= ay2:
        return 'has'
    if _sits_on(a, b):
        return 'on'
    if _sits_on(b, a):
        return 'under'
    x_overlap = min(ax2, bx2) > max(ax1, bx1)
    y_overlap = min(ay2, by2) > max(ay1, by1)
    if x_overlap and y_overlap:
        return 'in front of' if a_on_top else 'behind'
    if x_overlap:
        return 'above' if ay2 <= by1 else 'below'
    if y_overlap:
        return 'left of' if ax2 <= bx1 else 'right of'
    gap_x = max(bx1 - ax2, ax1 - bx2, 0)
    gap_y = max(by1 - ay2, ay1 - by2, 0)
    return 'near' if np.hypot(gap_x, gap_y) < 0.12 * max(width, height) else 'far from'


def _sits_on(a, b):
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, _ = b
    centre = (ax1 + ax2) / 2.0
    return (bx1 <= centre <= bx2 and ay1 < by1
            and by1 <= ay2 <= by1 + max(4.0, (ay2 - ay1) / 5.0))


def _box(rng, frac_lo, frac_hi, side):
    frac = rng.uniform(frac_lo, frac_hi)
    aspect = np.exp(rng.uniform(np.log(0.75), np.log(1.35)))
    return max(6, int(frac * side * np.sqrt(aspect))), max(6, int(frac * side / np.sqrt(aspect)))


def _fits(box, others, limit):
    return all(shapes.overlap_small(box, o) <= limit for o in others)


def _layout(rng, width, height):
    """Boxes in drawing order: supports low in the image, things on and in them, free ones."""
    side = min(width, height)
    boxes = []
    if rng.random() < 0.05:  # a few images with a single object and no relationship
        w, h = _box(rng, 0.2, 0.5, side)
        x, y = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
        return [(x, y, x + w, y + h)]
    supports = []
    for _ in range(int(rng.integers(1, 3))):
        for _try in range(20):
            w = int(rng.uniform(0.35, 0.55) * width)
            h = int(rng.uniform(0.2, 0.32) * height)
            x = int(rng.integers(0, width - w + 1))
            y = int(rng.integers(int(0.45 * height), height - h + 1))
            box = (x, y, x + w, y + h)
            if _fits(box, supports, 0.0):
                supports.append(box)
                break
    boxes.extend(supports)
    for sx1, sy1, sx2, sy2 in supports:
        if rng.random() < 0.75:  # something standing on the support
            w, h = _box(rng, 0.12, 0.22, side)
            lo, hi = max(0, sx1 - w // 3), min(width - w, sx2 - 2 * w // 3)
            y2 = sy1 + int(rng.integers(1, 4))
            if hi >= lo and y2 - h >= 0:
                x = int(rng.integers(lo, hi + 1))
                box = (x, y2 - h, x + w, y2)
                if _fits(box, [b for b in boxes if b not in supports], 0.2):
                    boxes.append(box)
        if rng.random() < 0.5:  # something inside the support's box
            w = int((sx2 - sx1) * rng.uniform(0.25, 0.45))
            h = int((sy2 - sy1) * rng.uniform(0.3, 0.6))
            if w >= 6 and h >= 6:
                x = int(rng.integers(sx1 + 2, sx2 - w - 1))
                y = int(rng.integers(sy1 + 2, sy2 - h - 1))
                box = (x, y, x + w, y + h)
                if _fits(box, [b for b in boxes if b not in supports], 0.2):
                    boxes.append(box)
    for _ in range(int(rng.integers(1, 4))):
        for _try in range(20):
            w, h = _box(rng, 0.1, 0.22, side)
            x, y = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
            box = (x, y, x + w, y + h)
            if _fits(box, boxes, 0.3):
                boxes.append(box)
                break
    return boxes


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


def _image(rng, image_size):
    width, height = shapes.image_size_for(rng, image_size)
    while True:
        boxes = _layout(rng, width, height)
        colours = []
        for k, box in enumerate(boxes):
            # A thing in or on another must not melt into it: avoid touching boxes' colours.
            taken = {colours[j] for j in range(k) if min(box[2], boxes[j][2]) >= max(
                box[0], boxes[j][0]) and min(box[3], boxes[j][3]) >= max(box[1], boxes[j][1])}
            free = [c for c in range(len(shapes.COLOURS)) if c not in taken]
            colours.append(free[int(rng.integers(0, len(free)))])
        kinds = [shapes.SHAPES[int(rng.integers(0, len(shapes.SHAPES)))] for _ in boxes]
        specs = [{'shape': k, 'rgb': shapes.COLOURS[c][1], 'box': b}
                 for k, c, b in zip(kinds, colours, boxes)]
        image, results = shapes.render(rng, width, height, specs)
        if all(r is not None and min(r['box'][2] - r['box'][0], r['box'][3] - r['box'][1]) >= 4
               for r in results):
            break
    objects = []
    for kind, colour, res in zip(kinds, colours, results):
        x1, y1, x2, y2 = res['box']
        area_frac = (x2 - x1) * (y2 - y1) / float(width * height)
        attrs = [shapes.COLOURS[colour][0]]
        if area_frac >= 0.12:
            attrs.append('large')
        elif area_frac < 0.025:
            attrs.append('small')
        objects.append({'box': res['box'], 'label': kind, 'attributes': attrs})
    rels = []
    pairs = [(i, j) for i in range(len(objects)) for j in range(i + 1, len(objects))]
    keep = min(1.0, 4.0 / max(1, len(pairs)))
    for i, j in pairs:
        pred = predicate(objects[i]['box'], objects[j]['box'], i > j, width, height)
        if pred in ('on', 'under', 'in', 'has'):
            # Mostly annotated from the smaller thing, as people describe scenes.
            if (pred in ('on', 'in')) != (rng.random() < 0.8):
                i, j, pred = j, i, _INVERSE[pred]
        elif rng.random() < keep:
            if rng.random() < 0.5:
                i, j, pred = j, i, _INVERSE[pred]
        else:
            continue
        rels.append((i, j, pred))
    return image, width, height, objects, rels


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
            image, width, height, objects, rels = _image(rng, image_size)
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
