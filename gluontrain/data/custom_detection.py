"""GluonCV's custom detection datasets without MXNet: ``LstDetection`` (a ``.lst`` file and
image files) and ``RecordFileDetection`` (a ``.rec`` with its ``.idx``).

``gluoncv.data.LstDetection`` / ``RecordFileDetection`` read them through MXNet. The classes
here give the same items, ``(img, label)``: the RGB uint8 image (a numpy array where GluonCV
gives an NDArray, decoded by OpenCV as MXNet's ``imdecode`` does) and the label ``[N, B]``,
``xmin, ymin, xmax, ymax, cls, extra...`` in pixels, of GluonCV's dtype (float64 from a
``.lst``, float32 from a record) and values. A malformed file is refused in one line naming
the file, the line or record and the fix, where GluonCV fails later naming no file, or trains
on it. numpy, OpenCV and Python only.
"""
import math
import os
import struct
import warnings

import numpy as np

from .checks import DatasetError, Problems
from .images import ImageMissingError, ImageReadError
from .recordio import IR_FORMAT, IR_SIZE, REWRITE, IndexedRecordReader, unpack
from .views import TransformView

__all__ = ['RecordFileDetection', 'LstDetection']

_HEAD = 512  # bytes read per record to check the labels: the IRHeader and 122 label values


def _label_problem(label, num_classes, normalized):
    """Why GluonCV's ``_transform_label`` or training would go wrong on the flat ``label``
    (a sequence of floats), or None."""
    fix = ('write [A, B, extra header..., then B values per object: cls, xmin, ymin, xmax, '
           'ymax] (GluonCV\'s "Prepare custom datasets" layout)')
    size = len(label)
    if size < 2:
        return ('has {} label value(s), not a detection label; {} (im2rec.py needs '
                '--pack-label for it)'.format(size, fix))
    if not all(map(math.isfinite, label)):
        return 'has a non-finite label value ({}); {}'.format(
            next(v for v in label if not math.isfinite(v)), fix)
    head, width = label[0], label[1]
    if head != int(head) or head < 2 or width != int(width) or width < 5:
        return ('has header width A={:g} and object width B={:g}; A counts the header values '
                '(at least 2: A and B), B the values per object (at least 5); {}'.format(
                    head, width, fix))
    head, width = int(head), int(width)
    if size < head + width:
        return ('has no object ({} label values, header width {}): GluonCV needs at least one '
                'per image; remove the image from the file'.format(size, head))
    if (size - head) % width:
        return ('has {} values after its {}-value header, which the label width B={} does not '
                'divide; fix A, B or the objects'.format(size - head, head, width))
    for k, start in enumerate(range(head, size, width)):
        cls, x1, y1, x2, y2 = label[start:start + 5]
        bad_cls = num_classes is not None and (cls != int(cls) or not 0 <= cls < num_classes)
        outside = normalized and not (0 <= x1 <= 1 and 0 <= y1 <= 1 and 0 <= x2 <= 1 and
                                      0 <= y2 <= 1)
        if not (bad_cls or outside or x1 >= x2 or y1 >= y2):
            continue
        what = 'object {} (class {:g}) box (xmin={:g}, ymin={:g}, xmax={:g}, ymax={:g})'.format(
            k, cls, x1, y1, x2, y2)
        if bad_cls:
            return ('{}: class id {:g} is not one of the {} classes given (0 to {}); fix the '
                    'id or pass the dataset\'s class list'.format(what, cls, num_classes,
                                                                  num_classes - 1))
        if outside:
            return ('{} lies outside [0, 1]: with coord_normalized=True coordinates are '
                    'fractions of the image width and height; divide pixel boxes by the image '
                    'size and clip them into [0, 1], or pass coord_normalized=False if the file '
                    'holds pixels'.format(what))
        return '{} is degenerate (needs xmin < xmax, ymin < ymax); fix or delete it'.format(
            what)
    return None


def _transform_label(label, height=None, width=None):
    """``gluoncv.data.recordio.detection._transform_label`` on a checked label: ``[N, B]``
    with the class moved to column 4 and, given the size, pixel coordinates."""
    label = np.array(label).ravel()
    out = label[int(label[0]):].reshape(-1, int(label[1]))
    ids = out[:, 0].copy()
    out[:, :4] = out[:, 1:5]
    out[:, 4] = ids
    if height is not None:
        out[:, (0, 2)] *= width
        out[:, (1, 3)] *= height
    return out


def _decode(data, flag, what, fix):
    """RGB (or, flag 0, grey ``[H, W, 1]``) uint8 pixels of the encoded ``data`` as MXNet's
    ``imdecode`` gives them: OpenCV, EXIF orientation ignored."""
    import cv2  # pylint: disable=import-outside-toplevel
    mode = (cv2.IMREAD_COLOR if flag else cv2.IMREAD_GRAYSCALE) | cv2.IMREAD_IGNORE_ORIENTATION
    img = cv2.imdecode(np.frombuffer(data, np.uint8), mode) if len(data) else None
    end = {b'\xff\xd8': b'\xff\xd9', b'\x89P': b'IEND'}.get(bytes(data[:2]))
    cut = end is not None and end not in bytes(data[-64:])
    if img is None:
        raise ImageReadError('{} {}: {}'.format(what, 'is empty (0 bytes)' if not len(data) else
                                                'is cut short (no end marker) and this OpenCV '
                                                'refuses it' if cut else
                                                'is not an image OpenCV can decode', fix))
    if cut:  # OpenCV 4 fills the missing rows grey, as MXNet's OpenCV 3.4 does, but not alike
        warnings.warn('{} lacks its end marker (cut short): OpenCV decodes the missing part, '
                      'MXNet\'s older libjpeg may fill it differently; {}.'.format(what, fix))
    return cv2.cvtColor(img, cv2.COLOR_BGR2RGB) if flag else img[:, :, None]


def _number(text):
    try:
        np.array([text]).astype('float')
    except ValueError:
        return False
    return True


def _check_pixels(label, height, width, where):
    boxes = label[:, :4]
    outside = (boxes < 0).any(1) | (boxes[:, (0, 2)] > width).any(1) | \
        (boxes[:, (1, 3)] > height).any(1)
    if outside.any():
        k = int(np.argmax(outside))
        raise DatasetError('{}: object {} box (xmin={:g}, ymin={:g}, xmax={:g}, ymax={:g}) lies '
                           'outside the {}x{} image (coord_normalized=False: pixels); clip it '
                           'to the image, or pass coord_normalized=True if the file holds '
                           'fractions of the size.'.format(where, k, *boxes[k].tolist(),
                                                           width, height))


class RecordFileDetection(TransformView):
    """``gluoncv.data.RecordFileDetection`` without MXNet: ``(RGB uint8 [H, W, 3], float32
    label [N, B])`` per record of a ``.rec`` with its ``.idx``, in ``.idx`` order.

    Every record's label is checked when the dataset is built (its header only is read);
    the image and, with ``coord_normalized=False``, its boxes against its size when the item
    is read.

    Parameters
    ----------
    filename : str
        The ``.rec`` path; the ``.idx`` lies beside it.
    coord_normalized : bool
        The boxes are fractions of the image size (multiplied by it, as GluonCV does).
    classes : sequence of str, optional
        The class names (the user's ``--classes``); class ids are checked against them.
    """

    def __init__(self, filename, coord_normalized=True, classes=None):
        self.filename, self._coord_normalized = filename, coord_normalized
        self.classes = None if classes is None else tuple(classes)
        self._record = IndexedRecordReader(filename)
        report = Problems('RecordIO file {}'.format(filename))
        for key in self._record.keys:
            where = self._record.where(key)
            record = self._record.read(key, limit=_HEAD)
            flag = struct.unpack(IR_FORMAT, record[:IR_SIZE])[0] if len(record) >= \
                IR_SIZE else 0
            if len(record) == _HEAD < IR_SIZE + 4 * flag:  # a label longer than read
                record = self._record.read(key, limit=IR_SIZE + 4 * flag)
            header, _ = unpack(record, where)
            problem = self._problem(header.label)
            if problem:
                report.add('{} {}.'.format(where, problem))
        report.raise_if_any()

    def _problem(self, label):
        return _label_problem(np.array(label, dtype=np.float32).ravel().tolist(),
                              None if self.classes is None else len(self.classes),
                              self._coord_normalized)

    def __len__(self):
        return len(self._record)

    def _item(self, idx):
        key = self._record.keys[idx]
        where = self._record.where(key)
        header, payload = unpack(self._record.read(key), where)
        problem = self._problem(header.label)
        if problem:  # the file changed since the dataset was built
            raise DatasetError('{} {}.'.format(where, problem))
        img = _decode(payload, 1, 'the image of ' + where,
                      'rewrite the record from the original image (' + REWRITE + ')')
        height, width = img.shape[:2]
        if self._coord_normalized:
            return img, _transform_label(header.label, height, width)
        label = _transform_label(header.label)
        _check_pixels(label, height, width, where)
        return img, label


class LstDetection(TransformView):
    """``gluoncv.data.LstDetection`` without MXNet: ``(RGB uint8 [H, W, 3], float64 label
    [N, B])`` per line of a ``.lst`` file (``index<TAB>label values...<TAB>image path``).

    Every line's label and the existence of its image are checked when the dataset is built;
    the image's decoding and, with ``coord_normalized=False``, the boxes against its size
    when the item is read.

    Parameters
    ----------
    filename : str
        The ``.lst`` path.
    root : str
        Folder the image paths are relative to (joined as GluonCV does).
    flag : int
        1: colour images; 0: greyscale ``[H, W, 1]``.
    coord_normalized : bool
        The boxes are fractions of the image size (multiplied by it, as GluonCV does).
    classes : sequence of str, optional
        The class names (the user's ``--classes``); class ids are checked against them.
    """

    def __init__(self, filename, root='', flag=1, coord_normalized=True, classes=None):
        self._flag, self._coord_normalized = flag, coord_normalized
        self.classes = None if classes is None else tuple(classes)
        self._items, self._labels, self._lines = [], [], []
        self.filename = full_path = os.path.expanduser(filename)
        if not os.path.isfile(full_path):
            raise DatasetError('.lst file {} does not exist: pass the path of the list GluonCV\'s '
                               '"Prepare custom datasets" tutorial writes.'.format(full_path))
        report = Problems('.lst file {}'.format(full_path))
        with open(full_path) as fin:
            for lineno, line in enumerate(fin, 1):
                fields = line.strip().split('\t')
                where = '{} line {}'.format(full_path, lineno)
                try:
                    label = np.array(fields[1:-1]).astype('float')
                except ValueError:
                    bad = next(k for k, v in enumerate(fields[1:-1], 2) if not _number(v))
                    report.add('{}: field {} ({!r}) is not a number: every field between the '
                               'index and the image path must be one; fix it.'.format(
                                   where, bad, fields[bad - 1]))
                    continue
                if len(fields) < 3:
                    report.add('{} has {} tab-separated field(s), not index<TAB>label '
                               'values...<TAB>image path; fix or delete the line.'.format(
                                   where, len(fields)))
                    continue
                problem = _label_problem(label.tolist(), None if classes is None else
                                         len(classes), coord_normalized)
                im_path = os.path.join(root, fields[-1])
                if problem:
                    report.add('{} {}.'.format(where, problem))
                elif not os.path.isfile(im_path):
                    report.add('{}: image {} does not exist; restore it, pass the folder the '
                               'paths are relative to as root, or delete the line.'.format(
                                   where, im_path))
                self._items.append(im_path)
                self._labels.append(label)
                self._lines.append(lineno)
        report.raise_if_any()

    def __len__(self):
        return len(self._items)

    def _item(self, idx):
        im_path, where = self._items[idx], '{} line {}'.format(self.filename, self._lines[idx])
        fix = 'restore the file (re-encode or re-download it), or delete {}'.format(where)
        if not os.path.isfile(im_path):
            raise ImageMissingError('image {} does not exist: {}'.format(im_path, fix))
        with open(im_path, 'rb') as f:
            data = f.read()
        img = _decode(data, self._flag, 'image {} ({})'.format(im_path, where), fix)
        height, width = img.shape[:2]
        if self._coord_normalized:
            return img, _transform_label(self._labels[idx], height, width)
        label = _transform_label(self._labels[idx])
        _check_pixels(label, height, width, where)
        return img, label
