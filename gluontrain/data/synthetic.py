"""Generated detection datasets in the real on-disk formats of Pascal VOC, MS COCO and the
Visual Genome scene-graph split.

Nothing here downloads anything: images are coloured shapes (one shape x colour style per
class, see :mod:`gluontrain.data.shapes`) and the annotations are written exactly as the real
datasets lay them out, so the stock readers (``gluoncv.data.VOCDetection``,
``gluoncv.data.COCODetection``, ``pycocotools.coco.COCO``, Scene-Graph-Benchmark's
``load_graphs``, seamseg's ``ISSDataset``) read them unchanged. Output is a pure function of the arguments: the same
seed and sizes give byte-identical files.
"""
import json
import os
from xml.sax.saxutils import escape

import numpy as np

from . import shapes
from ._io import file_lock, install, save_jpeg, staging_dir, write_json
from .coco import COCO_CATEGORIES, DEFAULT_COCO_CATEGORIES, write_coco
from .classes import VOC_CLASSES
from .iss import write_iss
from .vg import write_vg

__all__ = ['VOC_CLASSES', 'COCO_CATEGORIES', 'DEFAULT_VOC_CLASSES', 'DEFAULT_COCO_CATEGORIES',
           'DEFAULT_VOC_PARAMS', 'MARKER', 'write_voc', 'write_coco', 'write_vg', 'write_iss',
           'generate',
           'default_voc_root']

# Five classes drawn as a red circle, green square, blue triangle, yellow diamond and
# magenta cross: different in both shape and colour, so a tiny detector separates them early.
DEFAULT_VOC_CLASSES = ('bus', 'car', 'cat', 'dog', 'person')

# At most three objects of 20 % to 60 % of the shorter side: a 64 px mobilenet0.25 YOLOv3
# learns them from random weights in a few minutes on two CPU cores (README command (a)).
DEFAULT_VOC_PARAMS = {
    'num_train': 100, 'num_val': 50, 'seed': 0, 'years': (2007, 2012),
    'classes': DEFAULT_VOC_CLASSES, 'image_size': (160, 256), 'max_objects': 3,
    'object_size': (0.2, 0.6),
}

# Provenance and cache key of a generated VOCdevkit; VOC readers ignore unknown files.
MARKER = 'gluontrain_synthetic.json'
# Bump whenever the generator's output changes, so cached default datasets are rebuilt.
FORMAT_VERSION = 1

_TAG_VOC = 7001  # separates the random streams of the formats for one seed
_DIFFICULT_PROB = 0.1


def _voc_classes(classes):
    if classes is None:
        return VOC_CLASSES
    unknown = [c for c in classes if c not in VOC_CLASSES]
    if unknown or not classes:
        raise ValueError('classes must be a non-empty subset of the VOC class names {}; got '
                         'unknown {}'.format(VOC_CLASSES, unknown))
    # VOC order whatever order the caller used, so the draw styles do not depend on it.
    return tuple(c for c in VOC_CLASSES if c in set(classes))


def _voc_id(year, number):
    # Real VOC2007 ids are six digits, later years prefix the year.
    return '{:06d}'.format(number) if year == 2007 else '{}_{:06d}'.format(year, number)


def _voc_xml(year, image_id, width, height, objects):
    lines = ['<annotation>',
             '\t<folder>VOC{}</folder>'.format(year),
             '\t<filename>{}.jpg</filename>'.format(image_id),
             '\t<source>',
             '\t\t<database>gluontrain synthetic VOC{}</database>'.format(year),
             '\t\t<annotation>PASCAL VOC{}</annotation>'.format(year),
             '\t\t<image>synthetic</image>',
             '\t</source>',
             '\t<size>',
             '\t\t<width>{}</width>'.format(width),
             '\t\t<height>{}</height>'.format(height),
             '\t\t<depth>3</depth>',
             '\t</size>',
             '\t<segmented>0</segmented>']
    for obj in objects:
        xmin, ymin, xmax, ymax = obj['bndbox']
        lines += ['\t<object>',
                  '\t\t<name>{}</name>'.format(escape(obj['name'])),
                  '\t\t<pose>Unspecified</pose>',
                  '\t\t<truncated>{}</truncated>'.format(obj['truncated']),
                  '\t\t<difficult>{}</difficult>'.format(obj['difficult']),
                  '\t\t<bndbox>',
                  '\t\t\t<xmin>{}</xmin>'.format(xmin),
                  '\t\t\t<ymin>{}</ymin>'.format(ymin),
                  '\t\t\t<xmax>{}</xmax>'.format(xmax),
                  '\t\t\t<ymax>{}</ymax>'.format(ymax),
                  '\t\t</bndbox>',
                  '\t</object>']
    lines.append('</annotation>')
    return '\n'.join(lines) + '\n'


def _write_voc_year(year_dir, year, num_trainval, num_test, seed, classes, image_size,
                    max_objects, object_size):
    for sub in ('JPEGImages', 'Annotations', os.path.join('ImageSets', 'Main')):
        os.makedirs(os.path.join(year_dir, sub))
    total = num_trainval + num_test
    ids = [_voc_id(year, i + 1) for i in range(total)]
    split_rng = np.random.default_rng([seed, _TAG_VOC, year, 0])
    # Real VOC2007 interleaves test ids with trainval ids.
    perm = split_rng.permutation(total)
    test = sorted(ids[i] for i in perm[:num_test])
    trainval = sorted(ids[i] for i in perm[num_test:])
    perm = split_rng.permutation(len(trainval))
    half = (len(trainval) + 1) // 2
    lists = {'train': sorted(trainval[i] for i in perm[:half]),
             'val': sorted(trainval[i] for i in perm[half:]),
             'trainval': trainval}
    if year == 2007:
        lists['test'] = test  # only VOC2007 released its test annotations
    for i, image_id in enumerate(ids):
        rng = np.random.default_rng([seed, _TAG_VOC, year, 1, i])
        image, width, height, objects = shapes.render_scene(
            rng, image_size, len(classes), max_objects, classes, object_size)
        records = []
        for obj in objects:
            x1, y1, x2, y2 = obj['box']
            records.append({
                'name': obj['name'],
                # 1-based inclusive pixel corners, as in the real annotations
                'bndbox': (x1 + 1, y1 + 1, x2, y2),
                'truncated': int(x1 == 0 or y1 == 0 or x2 == width or y2 == height),
                'difficult': int(rng.random() < _DIFFICULT_PROB),
            })
        save_jpeg(image, os.path.join(year_dir, 'JPEGImages', image_id + '.jpg'))
        with open(os.path.join(year_dir, 'Annotations', image_id + '.xml'), 'w') as f:
            f.write(_voc_xml(year, image_id, width, height, records))
    for name, members in lists.items():
        with open(os.path.join(year_dir, 'ImageSets', 'Main', name + '.txt'), 'w') as f:
            f.writelines(m + '\n' for m in members)


def _voc_params(num_train, num_val, seed, years, classes, image_size, max_objects,
                object_size=(0.1, 0.6)):
    lo, hi = shapes.parse_image_size(image_size)
    small, large = (float(v) for v in object_size)
    if not 0 < small <= large <= 1:
        raise ValueError('object_size must be (min, max) fractions of the shorter image side '
                         'with 0 < min <= max <= 1, got {!r}'.format(object_size))
    return {'object_size': [small, large], 'num_train': int(num_train), 'num_val': int(num_val), 'seed': int(seed),
            'years': sorted({int(y) for y in years}), 'classes': list(_voc_classes(classes)),
            'image_size': [lo, hi], 'max_objects': int(max_objects)}


def write_voc(root, num_train=100, num_val=50, seed=0, years=(2007, 2012), classes=None,
              image_size=(160, 256), max_objects=8, object_size=(0.1, 0.6)):
    """Write a Pascal-VOC-format dataset under ``root/VOCdevkit``.

    Layout per year: ``VOC<year>/JPEGImages/<id>.jpg``, ``VOC<year>/Annotations/<id>.xml`` and
    ``VOC<year>/ImageSets/Main/{train,val,trainval}.txt`` (plus ``test.txt`` for 2007 only).
    Ids look like ``000001`` (2007) and ``2012_000001``. About 10 % of the objects are marked
    ``difficult``, objects touching the border ``truncated``. An existing ``VOCdevkit`` is
    replaced atomically.

    Parameters
    ----------
    root : str
        Folder that receives ``VOCdevkit``.
    num_train : int
        Images in the ``trainval`` list of *each* year (split about half/half into ``train``
        and ``val``).
    num_val : int
        Images in VOC2007 ``test``; requires 2007 in ``years`` when positive.
    seed : int
        Random seed; identical arguments give byte-identical files.
    years : sequence of int
        VOC years to write.
    classes : sequence of str, optional
        Subset of :data:`VOC_CLASSES` to draw (default all 20); class styles follow VOC order.
    image_size : int or (int, int)
        Fixed image side, or an inclusive ``(min, max)`` range for width and height.
    max_objects : int
        Most objects in one image (a fifth of the images have 4 or more when >= 4).
    object_size : (float, float)
        Smallest and largest object side as a fraction of the shorter image side (crowded
        images stay below ``1.1 / sqrt(count)``).

    Returns
    -------
    str
        The ``VOCdevkit`` path, to pass as ``root`` to ``gluoncv.data.VOCDetection``.
    """
    params = _voc_params(num_train, num_val, seed, years, classes, image_size, max_objects,
                         object_size)
    if params['num_train'] < 0 or params['num_val'] < 0 or params['max_objects'] < 1:
        raise ValueError('num_train and num_val must be >= 0 and max_objects >= 1')
    if params['num_val'] and 2007 not in params['years']:
        raise ValueError('num_val images form the VOC2007 test split; add 2007 to years or '
                         'pass num_val=0')
    root = os.path.abspath(os.path.expanduser(root))
    target = os.path.join(root, 'VOCdevkit')
    with staging_dir(root, 'VOCdevkit') as tmp:
        devkit = os.path.join(tmp, 'VOCdevkit')
        for year in params['years']:
            _write_voc_year(os.path.join(devkit, 'VOC{}'.format(year)), year,
                            params['num_train'], params['num_val'] if year == 2007 else 0,
                            params['seed'], tuple(params['classes']),
                            tuple(params['image_size']), params['max_objects'],
                            tuple(params['object_size']))
        write_json(os.path.join(devkit, MARKER), _marker(params), indent=1)
        install(tmp, [(devkit, target)])
    return target


def _marker(params):
    return {'generator': 'gluontrain.data.synthetic.write_voc',
            'format_version': FORMAT_VERSION, 'params': params}


def generate(kind, root, num_train=None, num_val=None, seed=0):
    """Write one of the synthetic datasets with its default parameters.

    Parameters
    ----------
    kind : {'voc', 'coco', 'vg', 'iss'}
        Which format.
    root : str
        Output folder (``root/VOCdevkit``, ``root/annotations`` ... are created in it).
    num_train, num_val : int, optional
        Image counts; ``None`` keeps the writer's default.
    seed : int
        Random seed.

    Returns
    -------
    str
        What the writer returns: the ``VOCdevkit`` path for VOC, ``root`` otherwise.
    """
    writers = {'voc': write_voc, 'coco': write_coco, 'vg': write_vg, 'iss': write_iss}
    if kind not in writers:
        raise ValueError('kind must be one of {}, got {!r}'.format(sorted(writers), kind))
    counts = {k: v for k, v in (('num_train', num_train), ('num_val', num_val)) if v is not None}
    return writers[kind](root, seed=seed, **counts)


def default_voc_root(root=None, **kwargs):
    """The embedded default VOC-format dataset, generated on first use and then reused.

    The default draws the five classes of :data:`DEFAULT_VOC_CLASSES` (red circle, green
    square, blue triangle, yellow diamond, magenta cross) in 160-256 px images, one to three
    objects per image with sides of 20-60 % of the shorter image side, 100 ``trainval``
    images per year for VOC2007 and VOC2012 and 50 held-out VOC2007 ``test`` images: small
    enough for a mobilenet0.25 YOLOv3 to learn in minutes on two CPU cores.

    Parameters
    ----------
    root : str, optional
        Dataset folder; default ``$GLUONTRAIN_DATA`` if set, else
        ``~/.gluontrain/datasets/synthetic_voc``, with ``_<class>_<class>...`` appended when
        ``classes`` overrides the default five and ``_val<N>`` when ``num_val`` overrides its
        50 (so that the default set and a variant are both kept instead of each regenerating
        the other).
    **kwargs
        Overrides of :data:`DEFAULT_VOC_PARAMS` (any :func:`write_voc` argument). The dataset
        is regenerated when they differ from the cached one's (recorded in
        ``VOCdevkit/gluontrain_synthetic.json``).

    Returns
    -------
    str
        The ``VOCdevkit`` path.
    """
    unknown = set(kwargs) - set(DEFAULT_VOC_PARAMS)
    if unknown:
        raise TypeError('unknown parameters {}; allowed: {}'.format(
            sorted(unknown), sorted(DEFAULT_VOC_PARAMS)))
    if root is None:
        root = os.environ.get('GLUONTRAIN_DATA') or os.path.join(
            '~', '.gluontrain', 'datasets', 'synthetic_voc')
        drawn = _voc_classes(kwargs.get('classes', DEFAULT_VOC_CLASSES))
        if drawn != DEFAULT_VOC_CLASSES:
            root = os.path.normpath(os.path.expanduser(root)) + '_' + '_'.join(drawn)
        num_val = int(kwargs.get('num_val', DEFAULT_VOC_PARAMS['num_val']))
        if num_val != DEFAULT_VOC_PARAMS['num_val']:
            root = os.path.normpath(os.path.expanduser(root)) + '_val{}'.format(num_val)
    root = os.path.abspath(os.path.expanduser(root))
    params = dict(DEFAULT_VOC_PARAMS, **kwargs)
    wanted = _marker(_voc_params(**params))
    devkit = os.path.join(root, 'VOCdevkit')
    with file_lock(os.path.join(root, '.gluontrain.lock')):
        if _read_marker(devkit) != wanted:
            write_voc(root, **params)
    return devkit


def _read_marker(devkit):
    try:
        with open(os.path.join(devkit, MARKER)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
