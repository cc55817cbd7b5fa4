"""The MS-COCO-format writer of :mod:`gluontrain.data.synthetic`."""
import datetime
import os

import numpy as np

from . import shapes
from ._io import install, save_jpeg, staging_dir, write_json

__all__ = ['COCO_CATEGORIES', 'COCO_CLASSES', 'DEFAULT_COCO_CATEGORIES', 'write_coco']


def _categories():
    # (supercategory, "id:name, id:name, ...") with COCO 2017's own non-contiguous ids.
    table = [
        ('person', '1:person'),
        ('vehicle', '2:bicycle,3:car,4:motorcycle,5:airplane,6:bus,7:train,8:truck,9:boat'),
        ('outdoor', '10:traffic light,11:fire hydrant,13:stop sign,14:parking meter,15:bench'),
        ('animal', '16:bird,17:cat,18:dog,19:horse,20:sheep,21:cow,22:elephant,23:bear,'
                   '24:zebra,25:giraffe'),
        ('accessory', '27:backpack,28:umbrella,31:handbag,32:tie,33:suitcase'),
        ('sports', '34:frisbee,35:skis,36:snowboard,37:sports ball,38:kite,39:baseball bat,'
                   '40:baseball glove,41:skateboard,42:surfboard,43:tennis racket'),
        ('kitchen', '44:bottle,46:wine glass,47:cup,48:fork,49:knife,50:spoon,51:bowl'),
        ('food', '52:banana,53:apple,54:sandwich,55:orange,56:broccoli,57:carrot,58:hot dog,'
                 '59:pizza,60:donut,61:cake'),
        ('furniture', '62:chair,63:couch,64:potted plant,65:bed,67:dining table,70:toilet'),
        ('electronic', '72:tv,73:laptop,74:mouse,75:remote,76:keyboard,77:cell phone'),
        ('appliance', '78:microwave,79:oven,80:toaster,81:sink,82:refrigerator'),
        ('indoor', '84:book,85:clock,86:vase,87:scissors,88:teddy bear,89:hair drier,'
                   '90:toothbrush'),
    ]
    cats = []
    for supercategory, entries in table:
        for entry in entries.split(','):
            cid, name = entry.split(':')
            cats.append({'supercategory': supercategory, 'id': int(cid), 'name': name})
    return cats


COCO_CATEGORIES = _categories()
#: the 80 names by category id: GluonCV's ``COCODetection.CLASSES`` order
COCO_CLASSES = tuple(c['name'] for c in sorted(COCO_CATEGORIES, key=lambda c: c['id']))

# Ten categories drawn by default (styles follow this order): ten different colours, and
# eight different shapes among the first eight.
DEFAULT_COCO_CATEGORIES = ('person', 'bicycle', 'car', 'bus', 'cat', 'dog', 'bottle', 'chair',
                           'cup', 'tv')

_TAG_COCO = 7002
_URL = 'https://gluontrain.invalid'  # reserved TLD: these images live nowhere on the web


def select_categories(categories):
    if categories is None:
        categories = DEFAULT_COCO_CATEGORIES
    elif categories == 'all':
        return list(COCO_CATEGORIES)
    by_name = {c['name']: c for c in COCO_CATEGORIES}
    by_id = {c['id']: c for c in COCO_CATEGORIES}
    chosen = []
    for c in categories:
        cat = by_id.get(c) if isinstance(c, (int, np.integer)) else by_name.get(c)
        if cat is None:
            raise ValueError('unknown COCO category {!r}: give names or ids of '
                             'COCO_CATEGORIES'.format(c))
        chosen.append(cat)
    if not chosen:
        raise ValueError('categories must not be empty')
    return sorted({c['id']: c for c in chosen}.values(), key=lambda c: c['id'])


def _crowd_object(rng, width, height, cls, placed):
    """A cluster of small same-class shapes, annotated as one ``iscrowd`` region."""
    side = min(width, height)
    shape, _, rgb = shapes.class_style(cls)
    for _ in range(20):
        rw = int(rng.integers(int(0.3 * side), int(0.45 * side) + 1))
        rh = int(rng.integers(int(0.3 * side), int(0.45 * side) + 1))
        rx, ry = int(rng.integers(0, width - rw + 1)), int(rng.integers(0, height - rh + 1))
        region = (rx, ry, rx + rw, ry + rh)
        if all(shapes.overlap_small(region, shapes.clip_box(b, width, height)) <= 0.3
               for b in placed):
            break
    else:
        return None
    parts = []
    for _ in range(int(rng.integers(3, 6))):
        pw = max(5, int(rw * rng.uniform(0.3, 0.45)))
        ph = max(5, int(rh * rng.uniform(0.3, 0.45)))
        px, py = rx + int(rng.integers(0, rw - pw + 1)), ry + int(rng.integers(0, rh - ph + 1))
        parts.append({'shape': shape, 'rgb': rgb, 'box': (px, py, px + pw, py + ph)})
    return {'parts': parts, 'class_index': cls, 'box': region}


def coco_image(rng, image_size, num_classes, max_objects, empty, crowd_prob):
    if empty:
        width, height = shapes.image_size_for(rng, image_size)
        image, _ = shapes.render(rng, width, height, [])
        return image, width, height, []
    names = list(range(num_classes))
    image, width, height, objects = shapes.render_scene(rng, image_size, num_classes,
                                                        max_objects, names)
    for obj in objects:
        obj['crowd'] = False
    if rng.random() < crowd_prob:
        crowd = _crowd_object(rng, width, height, int(rng.integers(0, num_classes)),
                              [o['box'] for o in objects])
        if crowd is not None:
            # Redraw the scene with the crowd on top; the same boxes come back from the masks.
            specs = []
            for obj in objects:
                shape, _, rgb = shapes.class_style(obj['class_index'])
                specs.append({'shape': shape, 'rgb': rgb, 'box': obj['full_box']})
            specs.append(crowd)
            image, results = shapes.render(rng, width, height, specs)
            for obj, res in zip(objects, results):
                obj.update(res)
            if results[-1] is not None:
                objects.append(dict(results[-1], class_index=crowd['class_index'], crowd=True))
    return image, width, height, objects


def _annotation(obj, ann_id, image_id, category_id, width, height):
    x1, y1, x2, y2 = obj['box']
    if obj['crowd']:
        segmentation = shapes.mask_to_rle(obj['mask'])
    else:
        shape = shapes.class_style(obj['class_index'])[0]
        poly = shapes.shape_polygon(shape, obj['full_box'], pixel_centres=False)
        clipped = shapes.clip_polygon(poly, width, height)
        segmentation = [[round(float(v), 2) for v in clipped.reshape(-1)]]
    return {'segmentation': segmentation, 'area': float(obj['mask'].sum()),
            'iscrowd': int(obj['crowd']), 'image_id': image_id,
            'bbox': [float(x1), float(y1), float(x2 - x1), float(y2 - y1)],
            'category_id': category_id, 'id': ann_id}


def write_coco(root, num_train=100, num_val=25, seed=0, categories=None, image_size=(160, 256),
               max_objects=8, crowd_prob=0.08):
    """Write an MS-COCO-2017-format detection dataset under ``root``.

    Writes ``annotations/instances_{train,val}2017.json`` and ``{train,val}2017/<12-digit
    id>.jpg``. The ``categories`` list always holds all 80 COCO categories with their real ids
    and supercategories; objects are drawn from ``categories`` only. Annotations carry polygon
    segmentations of the drawn shapes; a few are ``iscrowd`` clusters with an uncompressed RLE
    mask. Val has one (``num_val`` < 20) or two empty images, as real COCO has images without
    annotations. Existing outputs are replaced; ``annotations`` is installed last.

    Parameters
    ----------
    root : str
        Output folder.
    num_train, num_val : int
        Images in ``train2017`` and ``val2017``.
    seed : int
        Random seed; identical arguments give byte-identical files.
    categories : sequence of (str or int) or 'all', optional
        Names or ids of the categories to draw; default :data:`DEFAULT_COCO_CATEGORIES`.
    image_size : int or (int, int)
        Fixed image side, or an inclusive ``(min, max)`` range for width and height.
    max_objects : int
        Most (non-crowd) objects in one image.
    crowd_prob : float
        Chance that an image also gets one crowd region.

    Returns
    -------
    str
        ``root``, to pass to ``gluoncv.data.COCODetection(root=...)``.
    """
    cats = select_categories(categories)
    num_train, num_val = int(num_train), int(num_val)
    if num_train < 0 or num_val < 0:
        raise ValueError('num_train and num_val must be >= 0')
    root = os.path.abspath(os.path.expanduser(root))
    id_rng = np.random.default_rng([seed, _TAG_COCO, 0])
    # Non-contiguous ids interleaved between the splits, like the real ones.
    all_ids = np.cumsum(id_rng.integers(1, 60, size=num_train + num_val)) + 8
    perm = id_rng.permutation(num_train + num_val)
    split_ids = {'train2017': sorted(int(all_ids[i]) for i in perm[:num_train]),
                 'val2017': sorted(int(all_ids[i]) for i in perm[num_train:])}
    num_empty = 0 if num_val < 2 else (1 if num_val < 20 else 2)
    empty_val = set(int(i) for i in id_rng.choice(num_val, num_empty, replace=False))
    licenses = [{'url': _URL + '/license', 'id': 1,
                 'name': 'Synthetic image generated by gluontrain, no restrictions'}]
    ann_id = 1
    with staging_dir(root, 'coco') as tmp:
        os.makedirs(os.path.join(tmp, 'annotations'))
        moves = []
        for split_no, split in enumerate(('train2017', 'val2017')):
            os.makedirs(os.path.join(tmp, split))
            images, annotations = [], []
            for i, image_id in enumerate(split_ids[split]):
                rng = np.random.default_rng([seed, _TAG_COCO, split_no + 1, i])
                empty = split == 'val2017' and i in empty_val
                image, width, height, objects = coco_image(
                    rng, image_size, len(cats), max_objects, empty, crowd_prob)
                file_name = '{:012d}.jpg'.format(image_id)
                save_jpeg(image, os.path.join(tmp, split, file_name))
                captured = datetime.datetime(2013, 1, 1) + datetime.timedelta(
                    seconds=int(rng.integers(0, 3 * 10 ** 7)))
                images.append({
                    'license': 1, 'file_name': file_name,
                    'coco_url': '{}/{}/{}'.format(_URL, split, file_name),
                    'height': height, 'width': width,
                    'date_captured': captured.strftime('%Y-%m-%d %H:%M:%S'),
                    'flickr_url': '{}/flickr/{}'.format(_URL, file_name), 'id': image_id})
                for obj in objects:
                    annotations.append(_annotation(obj, ann_id, image_id,
                                                   cats[obj['class_index']]['id'],
                                                   width, height))
                    ann_id += 1
            dataset = {
                'info': {'description': 'gluontrain synthetic COCO-format dataset',
                         'url': _URL, 'version': '1.0', 'year': 2017,
                         'contributor': 'gluontrain', 'date_created': '2017/09/01'},
                'licenses': licenses, 'images': images, 'annotations': annotations,
                'categories': [dict(c) for c in COCO_CATEGORIES]}
            write_json(os.path.join(tmp, 'annotations', 'instances_{}.json'.format(split)),
                       dataset)
            moves.append((os.path.join(tmp, split), os.path.join(root, split)))
        final_ann = os.path.join(root, 'annotations')
        for split in ('train2017', 'val2017'):
            name = 'instances_{}.json'.format(split)
            moves.append((os.path.join(tmp, 'annotations', name), os.path.join(final_ann, name)))
        # Old annotations go before new images land: never new images under stale indexes.
        os.makedirs(final_ann, exist_ok=True)
        install(tmp, moves, remove_first=[dst for _, dst in moves[-2:]])
    return root
