"""Dataset validators that name the offending file and say what to do.

The stock readers fail on bad data with messages that name no file (a bare XML ``ParseError``,
an ``AssertionError`` on a box, a ``KeyError``); these checks run first and report every
problem they find (the first few in full, plus a count).
"""
import json
import os
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from .images import image_problem, looks_truncated, one_line, warn_size_mismatch
from .classes import VOC_CLASSES

# the Visual Genome checks are in vg_checks.py
__all__ = ['DatasetError', 'check_voc', 'check_coco']

GENERATE = 'python scripts/make_synthetic_data.py {} --root DIR'
SHOWN = 10


class DatasetError(ValueError):
    """A dataset on disk is missing or malformed; the message names the file and the fix.

    Attributes
    ----------
    problems : list of str
        Every problem found (the message shows the first few).
    """

    def __init__(self, message, problems=None):
        # one_line: a DataLoader worker's copy comes back with the worker's traceback inside
        super().__init__(one_line(message))
        self.problems = list(problems) if problems else [message]


class Problems:
    """Collects problems and raises them together."""

    def __init__(self, what):
        self.what = what
        self.items = []
        self.truncated = []

    def add(self, msg):
        self.items.append(msg)

    def check_truncated(self, path):
        """Note ``path`` if it lacks its end marker (warned about by :meth:`warn`)."""
        if looks_truncated(path):
            self.truncated.append(path)

    def warn(self):
        """One warning naming the truncated images: the MXNet / OpenCV readers of the VOC
        and COCO recipes decode them, as the references do, with the missing part blank."""
        n = len(self.truncated)
        if n:
            warnings.warn('{}: {} image{} look{} truncated (no end marker): {}{}; OpenCV decodes '
                          'the missing part as blank pixels, as the reference does; restore '
                          'them.'.format(self.what, n, '' if n == 1 else 's', 's' if n == 1 else '',
                                         ', '.join(self.truncated[:5]), ', ...' if n > 5 else ''))

    def raise_if_any(self):
        if not self.items:
            return
        n = len(self.items)
        head = '{} problem{} in {}'.format(n, '' if n == 1 else 's', self.what)
        if n > SHOWN:
            head += ' (first {} shown)'.format(SHOWN)
        if n == 1:
            # one problem, one line: the command line prints it as its one error line
            raise DatasetError('{}: {}'.format(head, self.items[0]), self.items)
        lines = [head + ':'] + ['  - ' + m for m in self.items[:SHOWN]]
        if n > SHOWN:
            lines.append('  ... and {} more.'.format(n - SHOWN))
        raise DatasetError('\n'.join(lines), self.items)


def missing_root(kind, root, expect):
    raise DatasetError(
        '{} dataset root {} does not exist. Point --dataset-root at the folder that contains '
        '{}, or generate a synthetic one with `{}`.'.format(
            kind, root, expect, GENERATE.format(kind.lower())))


def _image_size(path):
    from PIL import Image  # pylint: disable=import-outside-toplevel

    with Image.open(path) as im:
        return im.size


def _text(node, path):
    found = node.find(path)
    return None if found is None or found.text is None else found.text.strip()


def check_voc(root, splits, classes=None, check_images=True):
    """Validate a Pascal-VOC-format dataset before ``gluoncv.data.VOCDetection`` reads it.

    Parameters
    ----------
    root : str
        The ``VOCdevkit`` folder (the one holding ``VOC2007/``), as for ``VOCDetection``.
    splits : sequence of (int or str, str)
        ``(year, name)`` pairs such as ``[(2007, 'trainval')]``.
    classes : sequence of str, optional
        Accepted class names; default ``VOCDetection.CLASSES``.
    check_images : bool
        Also open every image (headers only) and compare its size with the XML's.

    Returns
    -------
    dict
        ``{'images': int, 'objects': int}`` counted over the splits.

    Raises
    ------
    DatasetError
        Listing every problem with its file and the fix.
    """
    classes = set(VOC_CLASSES if classes is None else classes)
    root = os.path.abspath(os.path.expanduser(root))
    if not os.path.isdir(root):
        missing_root('VOC', root, 'VOC2007/ (the VOCdevkit folder)')
    report = Problems('VOC dataset {}'.format(root))
    n_images = n_objects = 0
    for year, name in splits:
        # gluoncv's rule: an int year means VOC<year>/, anything else is the folder name
        folder = 'VOC{}'.format(year) if isinstance(year, int) else year
        year_dir = os.path.join(root, folder)
        if not os.path.isdir(year_dir):
            report.add('{} does not exist: the dataset root must be the folder that contains '
                       '{}/ (pass the VOCdevkit folder, not its parent or a year folder), '
                       'or drop ({!r}, {!r}) from the splits.'.format(year_dir, folder, year, name))
            continue
        list_file = os.path.join(year_dir, 'ImageSets', 'Main', name + '.txt')
        if not os.path.isfile(list_file):
            report.add('{} does not exist: split {!r} is not in {} (VOC2012 has no test '
                       'list); choose another split.'.format(list_file, name, folder))
            continue
        with open(list_file) as f:
            ids = [line.strip() for line in f.readlines()]
        if not any(ids):
            # gluoncv would read nothing from this split without a word (VOC2007 missing
            # from 07+12 training, or a validation over no image failing at the end)
            report.add('{} lists no image ids: split {!r} of {} is empty; write one image id '
                       'per line, or drop ({!r}, {!r}) from the splits.'.format(
                           list_file, name, folder, year, name))
            continue
        for lineno, image_id in enumerate(ids, 1):
            if not image_id:
                report.add('{} line {} is empty: every line must hold one image id; delete '
                           'the blank line.'.format(list_file, lineno))
                continue
            n_images += 1
            n_objects += _check_voc_image(report, year_dir, image_id, classes, check_images)
    report.warn()
    report.raise_if_any()
    return {'images': n_images, 'objects': n_objects}


def _check_voc_image(report, year_dir, image_id, classes, check_images):
    xml_path = os.path.join(year_dir, 'Annotations', image_id + '.xml')
    jpg_path = os.path.join(year_dir, 'JPEGImages', image_id + '.jpg')
    if check_images:
        problem = image_problem(jpg_path)
        if problem:
            report.add('image {} {}: restore it or remove {!r} from the ImageSets list.'.format(
                jpg_path, problem, image_id))
        else:
            report.check_truncated(jpg_path)
    if not os.path.isfile(xml_path):
        report.add('annotation {} is missing: restore it or remove {!r} from the ImageSets '
                   'list.'.format(xml_path, image_id))
        return 0
    try:
        tree = ET.parse(xml_path)
    except ET.ParseError as e:
        line, col = e.position
        reason = str(e).rsplit(': line', 1)[0]  # the position is reported separately
        report.add('annotation {} is not well-formed XML (line {}, column {}: {}): fix or '
                   'regenerate the file.'.format(xml_path, line, col, reason))
        return 0
    ann = tree.getroot()
    try:
        width, height = float(_text(ann, 'size/width')), float(_text(ann, 'size/height'))
    except (TypeError, ValueError):
        report.add('annotation {}: <size><width>/<height> missing or not numbers; add the '
                   'image size.'.format(xml_path))
        return 0
    if not (np.isfinite([width, height]).all() and width > 0 and height > 0):
        report.add('annotation {}: <size> {:g}x{:g} is not a positive finite size; write the '
                   'image\'s width and height.'.format(xml_path, width, height))
        return 0
    if check_images and os.path.isfile(jpg_path) and not image_problem(jpg_path):
        actual = _image_size(jpg_path)
        if actual != (int(width), int(height)):
            report.add('annotation {} says the image is {:g}x{:g} but {} is {}x{}: fix '
                       '<size> (boxes are checked against it).'.format(
                           xml_path, width, height, jpg_path, *actual))
    count = broken = 0
    for k, obj in enumerate(ann.iter('object')):
        name = _text(obj, 'name')
        where = 'annotation {}, object #{} ({!r})'.format(xml_path, k, name)
        if not name:
            report.add('annotation {}, object #{}: <name> missing; add the class name.'.format(
                xml_path, k))
            broken += 1
            continue
        if name.lower() not in classes:
            report.add('{}: unknown class {!r}; the readers silently skip it. Use one of {} or '
                       'pass the dataset\'s classes.'.format(where, name, sorted(classes)))
            continue
        difficult = _text(obj, 'difficult')
        if difficult is None or not difficult.lstrip('-').isdigit():
            report.add('{}: <difficult> missing or not an integer (gluoncv needs 0 or 1); add '
                       '<difficult>0</difficult>.'.format(where))
        try:
            box = [float(_text(obj, 'bndbox/' + t)) for t in ('xmin', 'ymin', 'xmax', 'ymax')]
        except (TypeError, ValueError):
            report.add('{}: <bndbox> with numeric xmin, ymin, xmax, ymax missing; add the '
                       'box.'.format(where))
            broken += 1
            continue
        xmin, ymin, xmax, ymax = box
        if not np.isfinite(box).all():
            # float() reads 'nan' and 'inf'; every comparison below would call them 'outside'
            report.add('{}: box (xmin={:g}, ymin={:g}, xmax={:g}, ymax={:g}) has a non-finite '
                       'coordinate; write pixel numbers or delete the object.'.format(
                           where, xmin, ymin, xmax, ymax))
            broken += 1
            continue
        # gluoncv's rule on the 0-based box (XML minus 1): 0 <= min < max <= size
        if not (1 <= xmin < xmax <= width + 1 and 1 <= ymin < ymax <= height + 1):
            kind = 'is degenerate' if xmin >= xmax or ymin >= ymax else 'lies outside the image'
            report.add('{}: box (xmin={:g}, ymin={:g}, xmax={:g}, ymax={:g}) {} of size '
                       '{:g}x{:g} (VOC boxes are 1-based: 1 <= xmin < xmax <= width, same for '
                       'y). Fix the coordinates or delete the object.'.format(
                           where, xmin, ymin, xmax, ymax, kind, width, height))
            broken += 1
            continue
        count += 1
    # An image whose objects are all broken is already reported object by object.
    if count == 0 and broken == 0:
        report.add('annotation {} has no valid object of the known classes; the detectors '
                   'need at least one per image: remove {!r} from the ImageSets list.'.format(
                       xml_path, os.path.splitext(os.path.basename(xml_path))[0]))
    return count


def load_json(report, path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        report.add('{} {} is not valid JSON (line {}, column {}: {}): fix or regenerate '
                   'it.'.format(what, path, e.lineno, e.colno, e.msg))
    except (OSError, UnicodeDecodeError) as e:
        report.add('{} {} cannot be read ({}).'.format(what, path, e))
    return None


def check_coco(root, split, classes=None, check_images=True):
    """Validate a COCO-format split before ``COCODetection`` / ``pycocotools`` read it.

    Parameters
    ----------
    root : str
        Folder holding ``annotations/`` and the image folders.
    split : str
        Annotation file stem, e.g. ``'instances_train2017'``.
    classes : sequence of str, optional
        If given, the category names sorted by id must equal it (``COCODetection`` requires
        its 80 ``CLASSES``).
    check_images : bool
        Check that every image file exists and is readable.

    Returns
    -------
    dict
        ``{'images': int, 'annotations': int}``.

    Raises
    ------
    DatasetError
        Listing every problem with its file and the fix.
    """
    root = os.path.abspath(os.path.expanduser(root))
    if not os.path.isdir(root):
        missing_root('COCO', root, 'annotations/ and train2017/')
    ann_file = os.path.join(root, 'annotations', split + '.json')
    if not os.path.isfile(ann_file):
        raise DatasetError(
            'COCO annotation file {} does not exist: point --dataset-root at the folder that '
            'contains annotations/{}.json, or generate one with `{}`.'.format(
                ann_file, split, GENERATE.format('coco')))
    report = Problems('COCO split {}'.format(ann_file))
    data = load_json(report, ann_file, 'COCO annotation file')
    report.raise_if_any()
    missing = [k for k in ('images', 'annotations', 'categories')
               if not isinstance(data, dict) or k not in data]
    if missing:
        raise DatasetError('COCO annotation file {} lacks the top-level keys {}: it must be an '
                           'object with images, annotations and categories lists.'.format(
                               ann_file, missing))
    cat_ids = {c.get('id') for c in data['categories']}
    if classes is not None:
        names = [c.get('name') for c in sorted(data['categories'], key=lambda c: c.get('id'))]
        if names != list(classes):
            report.add('{}: the categories (by id) are not the {} expected classes; gluoncv\'s '
                       'COCODetection needs exactly the 80 COCO categories.'.format(
                           ann_file, len(classes)))
    images, unsized = {}, set()
    for img in data['images']:
        lacking = [k for k in ('id', 'file_name', 'width', 'height', 'coco_url') if k not in img]
        if lacking:
            report.add('{}: image entry {} lacks {}; add them.'.format(
                ann_file, img.get('id', img.get('file_name')), lacking))
            continue
        images[img['id']] = img
        if not all(isinstance(img[k], (int, float)) and np.isfinite(img[k]) and img[k] > 0
                   for k in ('width', 'height')):
            report.add('{}: image entry {} has width/height {!r}x{!r}; write the image\'s '
                       'size in pixels.'.format(ann_file, img['id'], img['width'],
                                                img['height']))
            unsized.add(img['id'])
            continue
        if check_images:
            # gluoncv locates images by the last two parts of coco_url
            path = os.path.join(root, *img['coco_url'].split('/')[-2:])
            problem = image_problem(path)
            if problem:
                report.add('{}: image {} (id {}) {}: restore it or remove the image and its '
                           'annotations.'.format(ann_file, path, img['id'], problem))
            else:
                report.check_truncated(path)
                # the readers tolerate it (boxes are pixels); said, as the VG reader does
                warn_size_mismatch(path, _image_size(path), (img['width'], img['height']),
                                   '{} (image id {})'.format(ann_file, img['id']),
                                   'boxes are clipped to the declared size; fix width/height')
    seen = set()
    for ann in data['annotations']:
        aid = ann.get('id')
        where = '{}: annotation id {}'.format(ann_file, aid)
        if aid in seen:
            report.add('{} is duplicated; annotation ids must be unique.'.format(where))
        seen.add(aid)
        img = images.get(ann.get('image_id'))
        if img is None:
            report.add('{} refers to image_id {} which is not in images; fix the id or drop '
                       'the annotation.'.format(where, ann.get('image_id')))
            continue
        where += ' (image {})'.format(img['file_name'])
        if ann.get('category_id') not in cat_ids:
            report.add('{}: category_id {} is not in categories; use one of the listed '
                       'ids.'.format(where, ann.get('category_id')))
        bbox = ann.get('bbox')
        if not isinstance(bbox, list) or len(bbox) != 4:
            report.add('{}: bbox must be [x, y, width, height], got {!r}.'.format(where, bbox))
            continue
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bbox):
            report.add('{}: bbox must hold four numbers [x, y, width, height], got {!r}.'.format(
                where, bbox))
            continue
        x, y, w, h = bbox
        if not np.isfinite(bbox).all():
            # json reads NaN and Infinity; every comparison with NaN is False
            report.add('{}: bbox {} has a non-finite value; write pixel numbers or drop the '
                       'annotation.'.format(where, bbox))
        elif w <= 0 or h <= 0:
            report.add('{}: bbox {} has non-positive width/height; fix or drop the '
                       'annotation.'.format(where, bbox))
        elif ann.get('image_id') in unsized:
            continue
        elif x < -1 or y < -1 or x + w > img['width'] + 1 or y + h > img['height'] + 1:
            report.add('{}: bbox [x, y, w, h] = {} reaches outside the {}x{} image by more '
                       'than 1 px; clip it to the image.'.format(
                           where, bbox, img['width'], img['height']))
    if not data['images']:
        report.add('{} lists no images: the split is empty; add images, or point '
                   '--dataset-root at a dataset whose split has some.'.format(ann_file))
    report.warn()
    report.raise_if_any()
    return {'images': len(images), 'annotations': len(data['annotations'])}

