"""The seamseg ISS-format writer of :mod:`gluontrain.data.synthetic`: seamseg's own format
(read by ``seamseg/data/dataset.py`` ``ISSDataset``, written by its
``scripts/data_preparation/prepare_vistas.py``); the files and what each instance is:
docs/datasets.md, "Formats" ("seamseg ISS")."""
import os

import numpy as np
import umsgpack
from PIL import Image

from ._io import install, save_jpeg, staging_dir, write_json
from .coco import coco_image, select_categories

__all__ = ['write_iss', 'ISS_STUFF']

ISS_STUFF = ('background',)
_TAG_ISS = 7004
_VOID = 255


def _instances(objects, width, height):
    """Instance mask (0 void, 1 background stuff, 2.. objects in drawing order, later ones on
    top) and the objects that kept at least one pixel."""
    msk = np.ones((height, width), dtype=np.uint8)
    for k, obj in enumerate(objects):
        msk[obj['mask']] = k + 2
    kept, remap = [], np.zeros(len(objects) + 2, dtype=np.uint8)
    remap[1] = 1
    for k, obj in enumerate(objects):
        if (msk == k + 2).any():
            kept.append(obj)
            remap[k + 2] = len(kept) + 1
    return remap[msk], kept


def _mask_box(mask):
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def write_iss(root, num_train=100, num_val=25, seed=0, categories=None, image_size=(160, 256),
              max_objects=8, crowd_prob=0.08):
    """Write a seamseg-ISS-format dataset under ``root`` (splits ``train`` and ``val``).

    Parameters
    ----------
    root : str
        Output folder; ``img``, ``msk``, ``lst``, ``coco`` and ``metadata.bin`` are replaced.
    num_train, num_val : int
        Images in ``lst/train.txt`` and ``lst/val.txt``.
    seed : int
        Random seed; identical arguments give byte-identical files.
    categories : sequence of (str or int), optional
        COCO category names or ids drawn as things; default the COCO writer's ten.
    image_size : int or (int, int)
        Fixed side or inclusive ``(min, max)`` range.
    max_objects : int
        Most non-crowd objects in one image.
    crowd_prob : float
        Chance of one ``iscrowd`` cluster in an image.

    Returns
    -------
    str
        ``root``.
    """
    cats = select_categories(categories)
    num_train, num_val = int(num_train), int(num_val)
    if num_train < 0 or num_val < 0:
        raise ValueError('num_train and num_val must be >= 0')
    root = os.path.abspath(os.path.expanduser(root))
    num_stuff = len(ISS_STUFF)
    names = list(ISS_STUFF) + [c['name'] for c in cats]
    from .shapes import class_style  # pylint: disable=import-outside-toplevel
    palette = [[128, 128, 128]] + [list(class_style(i)[2]) for i in range(len(cats))]
    meta = {'num_stuff': num_stuff, 'num_thing': len(cats), 'categories': names,
            'palette': palette, 'original_ids': [0] * num_stuff + [c['id'] for c in cats]}
    images = []
    with staging_dir(root, 'iss') as tmp:
        for sub in ('img', 'msk', 'lst', 'coco'):
            os.makedirs(os.path.join(tmp, sub))
        ann_id = 1
        for split_no, (split, count) in enumerate((('train', num_train), ('val', num_val))):
            ids, coco_images, coco_anns = [], [], []
            for i in range(count):
                rng = np.random.default_rng([seed, _TAG_ISS, split_no, i])
                image, width, height, objects = coco_image(rng, image_size, len(cats),
                                                            max_objects, False, crowd_prob)
                msk, kept = _instances(objects, width, height)
                img_id = '{}_{:06d}'.format(split, i + 1)
                ids.append(img_id)
                save_jpeg(image, os.path.join(tmp, 'img', img_id + '.jpg'))
                Image.fromarray(msk, mode='L').save(os.path.join(tmp, 'msk', img_id + '.png'))
                cat = [_VOID, 0] + [num_stuff + o['class_index'] for o in kept]
                iscrowd = [0, 0] + [int(o['crowd']) for o in kept]
                images.append({'id': img_id, 'cat': cat, 'size': [height, width],
                               'iscrowd': iscrowd})
                coco_images.append({'id': img_id, 'file_name': img_id + '.jpg',
                                    'width': width, 'height': height})
                for k, obj in enumerate(kept):
                    x0, y0, x1, y1 = _mask_box(msk == k + 2)
                    coco_anns.append({'id': ann_id, 'image_id': img_id,
                                      'category_id': num_stuff + obj['class_index'],
                                      'iscrowd': int(obj['crowd']),
                                      'area': float((msk == k + 2).sum()),
                                      'bbox': [float(x0), float(y0), float(x1 - x0),
                                               float(y1 - y0)]})
                    ann_id += 1
            with open(os.path.join(tmp, 'lst', split + '.txt'), 'w') as f:
                f.writelines(i + '\n' for i in ids)
            write_json(os.path.join(tmp, 'coco', split + '.json'), {
                'info': {'description': 'gluontrain synthetic ISS dataset'},
                'images': coco_images, 'annotations': coco_anns,
                'categories': [{'id': num_stuff + k, 'name': c['name']}
                               for k, c in enumerate(cats)]})
        with open(os.path.join(tmp, 'metadata.bin'), 'wb') as f:
            umsgpack.dump({'images': images, 'meta': meta}, f)  # seamseg's call
        moves = [(os.path.join(tmp, sub), os.path.join(root, sub))
                 for sub in ('img', 'msk', 'lst', 'coco', 'metadata.bin')]
        # metadata.bin last, and the old one away first: never new images under a stale index
        install(tmp, moves, remove_first=[os.path.join(root, 'metadata.bin')])
    return root
