"""YOLOv3 anchors: GluonCV's, ``--anchors`` text, the anchors a weights file holds, and
anchors proposed for a dataset (numpy only; docs/from_gluoncv.md, "Anchors").

The anchors are tensors of the network (``yolo_outputs.N.anchors``, deep first, saved in
``.params`` by ``save_parameters``), so a weights file carries them: :func:`file_anchors` reads
them back and :func:`check_anchors` decides what a loader does with a file whose anchors are
not the network's (docs/checkpoints.md, "Anchors"). :func:`propose_anchors` is darknet's
``calc_anchors`` k-means with ``1 - IoU`` as the distance; :func:`mean_best_iou` scores
anchors on boxes (:func:`voc_boxes_wh`: a dataset's training boxes)."""
import argparse
import math
import os
import xml.etree.ElementTree as ET

import numpy as np

__all__ = ['GLUONCV_ANCHORS', 'GLUONCV_ANCHORS_TEXT', 'anchors_arg', 'anchor_scales',
           'anchors_text', 'anchor_pairs', 'describe', 'file_anchors', 'check_anchors',
           'anchors_line', 'ANCHOR_MODES', 'wh_iou', 'mean_best_iou', 'propose_anchors',
           'voc_boxes_wh']

#: GluonCV's YOLOv3 anchors, ``(w, h)`` pairs per scale, shallow (stride 8) to deep (stride 32)
GLUONCV_ANCHORS = ((10, 13, 16, 30, 33, 23), (30, 61, 62, 45, 59, 119),
                   (116, 90, 156, 198, 373, 326))
SCALES, PAIRS = 3, 3

_EXAMPLE = '10,13,16,30,33,23;30,61,62,45,59,119;116,90,156,198,373,326'


def _number(value):
    """Canonical text of one anchor side: ``'{:g}'`` (``373``, ``10.5``), the same for a
    float32 read from a file and the decimal the user typed."""
    return '{:g}'.format(float(value))


def anchors_text(scales):
    """The ``--anchors`` text of anchors given as scales of ``w, h`` numbers (any nesting
    holding ``3 x 3`` pairs, shallow first), canonical: ``'10,13,...;30,61,...;116,90,...'``."""
    flat = np.asarray(scales, dtype=np.float64).reshape(SCALES, PAIRS * 2)
    return ';'.join(','.join(_number(v) for v in row) for row in flat)


#: :data:`GLUONCV_ANCHORS` as ``--anchors`` text (its default)
GLUONCV_ANCHORS_TEXT = anchors_text(GLUONCV_ANCHORS)


def anchors_arg(text):
    """``--anchors``: three ``;``-separated scales of three ``w,h`` pairs, shallow first, each
    side a positive number of input pixels; ``''`` is GluonCV's anchors. Returns the canonical
    text (:func:`anchors_text`), so that runs, checkpoints and files compare as text.

    Raises
    ------
    argparse.ArgumentTypeError
        One line: what is wrong and the form, with GluonCV's anchors as the example.
    """
    text = (text or '').strip()
    if not text:
        return GLUONCV_ANCHORS_TEXT
    form = ('give three ;-separated scales (shallow first) of three w,h pairs each, e.g. '
            "'{}' (GluonCV's)".format(_EXAMPLE))
    scales = text.split(';')
    if len(scales) != SCALES:
        raise argparse.ArgumentTypeError('{!r} has {} scale{}, YOLOv3 has {}; {}'.format(
            text, len(scales), '' if len(scales) == 1 else 's', SCALES, form))
    values = []
    for i, scale in enumerate(scales):
        parts = [p.strip() for p in scale.split(',')]
        if len(parts) != PAIRS * 2:
            raise argparse.ArgumentTypeError(
                '{!r}: scale {} ({!r}) has {} numbers, not {} ({} w,h pairs); {}'.format(
                    text, i + 1, scale.strip(), len(parts), PAIRS * 2, PAIRS, form))
        for part in parts:
            try:
                value = float(part)
            except ValueError:
                raise argparse.ArgumentTypeError('{!r}: {!r} is not a number; {}'.format(
                    text, part, form)) from None
            if not (math.isfinite(value) and value > 0):
                raise argparse.ArgumentTypeError(
                    '{!r}: {} is not a positive size in pixels; {}'.format(text, part, form))
            values.append(value)
    return anchors_text(values)


def anchor_scales(text):
    """The anchors of ``--anchors`` text (canonical or not) as GluonCV's nesting: a list of
    three lists of six numbers (ints where whole), shallow first, what its YOLOv3 constructors
    take as ``anchors``."""
    flat = np.asarray([float(v) for v in anchors_arg(text).replace(';', ',').split(',')])
    return [[int(v) if v == int(v) else float(v) for v in row]
            for row in flat.reshape(SCALES, PAIRS * 2)]


def anchor_pairs(anchors):
    """The ``(9, 2)`` float64 ``(w, h)`` array of anchors given as text, scales or pairs."""
    if isinstance(anchors, str):
        anchors = anchor_scales(anchors)
    return np.asarray(anchors, dtype=np.float64).reshape(-1, 2)


def describe(text):
    """``text``, with `` (GluonCV's)`` when it is GluonCV's anchors."""
    return text + (" (GluonCV's)" if text == GLUONCV_ANCHORS_TEXT else '')


# ------------------------------------------------------------------ anchors of a weights file
def _output_index(name):
    """``N`` of ``yolo_outputs.N.anchors`` (a ``save_parameters`` / state_dict name), or None."""
    parts = name.split('.')
    if len(parts) == 3 and parts[0] == 'yolo_outputs' and parts[2] == 'anchors' and \
            parts[1].isdigit():
        return int(parts[1])
    return None


def file_anchors(arrays):
    """The ``--anchors`` text of the ``yolo_outputs.N.anchors`` tensors of ``arrays`` (names
    as ``save_parameters`` writes them; numpy arrays, NDArrays or tensors), or ``None`` when
    they are not three outputs of three pairs (not a YOLOv3 of GluonCV's layout)."""
    found = {}
    for name, value in arrays.items():
        index = _output_index(name)
        if index is not None and value is not None:
            value = value.asnumpy() if hasattr(value, 'asnumpy') else value
            value = value.detach().cpu().numpy() if hasattr(value, 'detach') else value
            found[index] = np.asarray(value, dtype=np.float64).reshape(-1)
    if sorted(found) != list(range(SCALES)) or any(v.size != PAIRS * 2 for v in found.values()):
        return None
    # yolo_outputs run deep first (GluonCV reverses the anchors it is given)
    return anchors_text([found[i] for i in reversed(range(SCALES))])


#: what a loader does with a file whose anchors are not the network's: ``'file'`` loads them
#: (Gluon's ``load_parameters``: the network then has the file's), ``'same'`` refuses the file,
#: ``'network'`` keeps the network's (the file's are not loaded)
ANCHOR_MODES = ('file', 'same', 'network')


def check_anchors(file_text, net_text, mode, what, path):
    """Apply a loader's anchors ``mode`` (:data:`ANCHOR_MODES`) to a file's anchors.

    Parameters
    ----------
    file_text, net_text : str or None
        :func:`file_anchors` of the file and of the network (None: not found, nothing to do).
    mode : str
    what, path : str
        The argument and the file, for the message.

    Returns
    -------
    bool
        Whether the file's anchor tensors are loaded (``False`` only for ``'network'`` with
        anchors that differ).

    Raises
    ------
    ValueError
        ``'same'`` and other anchors: one line naming both and the ``--anchors`` to pass.
    """
    if mode not in ANCHOR_MODES:
        raise ValueError('anchors={!r}: choose one of {}'.format(mode, ', '.join(ANCHOR_MODES)))
    if file_text is None or net_text is None or file_text == net_text:
        return True
    if mode == 'same':
        raise ValueError(
            '{} {} was trained with --anchors {}, but this network is built with --anchors {}; '
            "pass --anchors '{}' (the box outputs of a YOLOv3 are relative to its anchors, and "
            'the training targets are matched to them)'.format(
                what, path, describe(file_text), describe(net_text), file_text))
    return mode == 'file'


def anchors_line(file_text, net_text=None):
    """The log / report line about a loaded file's anchors, or None when there is nothing to
    say: with ``net_text`` (a network that kept its own, ``--transfer``) when they differ,
    without it (inference, which takes the file's) when they are not GluonCV's."""
    if file_text is None:
        return None
    if net_text is not None:
        if file_text == net_text:
            return None
        return ("anchors: --anchors {} kept; the file's {} not loaded: its box rows were "
                'trained for them'.format(describe(net_text), describe(file_text)))
    if file_text == GLUONCV_ANCHORS_TEXT:
        return None
    return 'anchors (from the file): {}'.format(file_text)


# ------------------------------------------------------------------ k-means on box shapes
def wh_iou(boxes_wh, anchors_wh):
    """IoU of boxes and anchors all centred at the origin (only widths and heights count):
    ``min(w) min(h) / (area_box + area_anchor - min(w) min(h))``, ``(N, K)``."""
    boxes = np.asarray(boxes_wh, dtype=np.float64).reshape(-1, 2)
    anchors = np.asarray(anchors_wh, dtype=np.float64).reshape(-1, 2)
    inter = np.minimum(boxes[:, None, 0], anchors[None, :, 0]) * \
        np.minimum(boxes[:, None, 1], anchors[None, :, 1])
    union = (boxes[:, 0] * boxes[:, 1])[:, None] + (anchors[:, 0] * anchors[:, 1])[None] - inter
    return inter / union


def mean_best_iou(boxes_wh, anchors):
    """Mean over the boxes of the IoU with their best anchor (:func:`wh_iou`): how well
    ``anchors`` (text, scales or ``(K, 2)`` pairs) fit boxes ``(N, 2)`` of ``(w, h)``."""
    boxes = _boxes(boxes_wh)
    return float(wh_iou(boxes, anchor_pairs(anchors)).max(axis=1).mean())


def _boxes(boxes_wh):
    boxes = np.asarray(boxes_wh, dtype=np.float64).reshape(-1, 2)
    if not len(boxes):
        raise ValueError('no boxes to fit anchors to')
    if not np.all(np.isfinite(boxes)) or np.any(boxes <= 0):
        raise ValueError('box widths and heights must be positive and finite')
    return boxes


def propose_anchors(boxes_wh, k=9, seed=0, max_iter=300):
    """Anchors for boxes ``(N, 2)`` of ``(w, h)`` pixels: k-means with ``1 - IoU`` of
    origin-centred boxes as the distance (YOLOv2/v3, darknet's ``calc_anchors``).

    Seeded k-means++ start (``np.random.RandomState(seed)``), then Lloyd's iterations: each
    box goes to its highest-IoU centroid, each centroid becomes the mean ``(w, h)`` of its boxes
    (an emptied one restarts at the box fitting its centroid worst), until no box moves. The
    centroids are rounded to whole pixels (at least 1) and sorted by area.

    Parameters
    ----------
    boxes_wh : array-like
    k : int
        A multiple of 3 (9 for ``--anchors``).
    seed : int
    max_iter : int

    Returns
    -------
    list
        ``k // 3`` ``w, h`` numbers per scale, three scales, smallest first: GluonCV's nesting
        (:func:`anchors_text` makes it ``--anchors`` text).
    """
    boxes = _boxes(boxes_wh)
    if k < SCALES or k % SCALES:
        raise ValueError('k={}: give a multiple of {} (one third per output scale)'.format(
            k, SCALES))
    distinct = np.unique(boxes, axis=0)
    if len(distinct) < k:
        raise ValueError('{} distinct box shapes cannot make {} anchors'.format(
            len(distinct), k))
    rng = np.random.RandomState(seed)
    centroids = [boxes[rng.randint(len(boxes))]]
    while len(centroids) < k:
        dist = 1 - wh_iou(boxes, np.array(centroids)).max(axis=1)
        weights = dist ** 2
        total = weights.sum()
        pick = rng.choice(len(boxes), p=weights / total) if total > 0 else rng.randint(len(boxes))
        centroids.append(boxes[pick])
    centroids = np.array(centroids, dtype=np.float64)
    assign = None
    for _ in range(max_iter):
        iou = wh_iou(boxes, centroids)
        new = iou.argmax(axis=1)
        if assign is not None and np.array_equal(new, assign):
            break
        assign = new
        for j in range(k):
            members = boxes[assign == j]
            if len(members):
                centroids[j] = members.mean(axis=0)
            else:
                worst = iou[np.arange(len(boxes)), assign].argmin()
                centroids[j] = boxes[worst]
    anchors = np.maximum(np.round(centroids), 1)
    anchors = anchors[np.lexsort((anchors[:, 0], anchors[:, 0] * anchors[:, 1]))]
    per_scale = anchors.reshape(SCALES, -1)
    return [[int(v) for v in row] for row in per_scale]


# ------------------------------------------------------------------ the dataset's boxes
def voc_boxes_wh(dataset, data_shape):
    """``(w, h)`` of every box of a :class:`gluontrain.yolo3.data.VOCDetection` at the
    network's input: GluonCV's train transform resizes each image to ``data_shape`` x
    ``data_shape``, so widths scale by ``data_shape / image width`` and heights by
    ``data_shape / image height`` (the random expansion and crop before it aside)."""
    out = []
    for (folder, image_id), label in zip(dataset.items, dataset.labels):
        if label is None or not len(label):
            continue
        size = ET.parse(os.path.join(folder, 'Annotations', image_id + '.xml')).getroot() \
            .find('size')
        width, height = float(size.find('width').text), float(size.find('height').text)
        label = np.asarray(label, dtype=np.float64)
        out.append(np.stack([(label[:, 2] - label[:, 0]) * data_shape / width,
                             (label[:, 3] - label[:, 1]) * data_shape / height], axis=1))
    return np.concatenate(out) if out else np.zeros((0, 2))

