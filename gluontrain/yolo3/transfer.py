"""GluonCV's ``YOLOV3.reset_class`` bookkeeping, shared by both backends (plain Python).

This module resolves GluonCV's three spellings of ``reuse_weights`` to ``{new index: old
index}`` (:func:`resolve_reuse`) and lists the prediction rows to copy (:func:`rows_to_copy`);
the backends apply them to their tensors. The operation, GluonCV's rule for the box and
objectness rows, and ``keep_box_rows=True``: docs/faithfulness.md, "``reset_class`` and
``--transfer``"."""
import os
import warnings

from ..core import model_store
from ..data.classes import VOC_CLASSES
from ..data.coco import COCO_CLASSES
from .args import class_names, reuse_pair_list

__all__ = ['resolve_reuse', 'rows_to_copy', 'reuse_summary', 'transfer_source', 'reuse_spec',
           'transfer_fix', 'ZOO_CLASSES']

#: the classes of the zoo's detectors, by the dataset their name ends with (GluonCV's order)
ZOO_CLASSES = {'voc': tuple(VOC_CLASSES),
               'coco': COCO_CLASSES}

#: rows of an anchor before its class rows: centre x, y, scale w, h, objectness
BOX_ROWS = 5


def _index(value, names, which):
    if isinstance(value, str):
        try:
            return list(names).index(value)
        except ValueError:
            raise ValueError('{} not found in {} class names {}'.format(
                value, which, list(names))) from None
    if value < 0 or value >= len(names):
        raise ValueError('Index {} out of bounds for {} class names'.format(value, which))
    return int(value)


def resolve_reuse(old_classes, new_classes, reuse_weights):
    """``{new index: old index}`` from GluonCV's ``reuse_weights``.

    Parameters
    ----------
    old_classes, new_classes : sequence of str
    reuse_weights : dict, list or None
        ``{new: old}`` with indices or names (mixed allowed; an unknown name or an index out of
        range raises ``ValueError`` as GluonCV's does), or a list of names found in both lists
        (a name missing from either is warned about and skipped, as GluonCV does).

    Returns
    -------
    dict or None
        None when ``reuse_weights`` is neither a dict nor a list.
    """
    if isinstance(reuse_weights, dict):
        return {_index(k, new_classes, 'new'): _index(v, old_classes, 'old')
                for k, v in reuse_weights.items()}
    if isinstance(reuse_weights, list):
        mapping = {}
        for name in reuse_weights:
            if name in new_classes and name in old_classes:
                mapping[list(new_classes).index(name)] = list(old_classes).index(name)
            else:
                warnings.warn('{} not found in old: {} or new class names: {}'.format(
                    name, list(old_classes), list(new_classes)))
        return mapping
    return None


def rows_to_copy(mapping, num_anchors, old_num_class, new_num_class, keep_box_rows=False):
    """``[(new row, old row)]`` of one prediction convolution, in GluonCV's copy order.

    For each mapping entry and anchor: the class row, then the anchor's five box and
    objectness rows. An entry out of range (possible only for mappings not made by
    :func:`resolve_reuse`) is warned about and skipped, as GluonCV's output layer does.
    ``keep_box_rows``: the box and objectness rows of every anchor are copied even without
    a mapping.
    """
    new_pred, old_pred = BOX_ROWS + new_num_class, BOX_ROWS + old_num_class
    pairs = []
    if keep_box_rows:
        for i in range(num_anchors):
            pairs += [(i * new_pred + r, i * old_pred + r) for r in range(BOX_ROWS)]
    for k, v in (mapping or {}).items():
        if k >= new_num_class or v >= old_num_class:
            warnings.warn('reuse mapping {}/{} -> {}/{} out of range'.format(
                k, new_num_class, v, old_num_class))
            continue
        for i in range(num_anchors):
            pairs.append((BOX_ROWS + k + i * new_pred, BOX_ROWS + v + i * old_pred))
            pairs += [(i * new_pred + r, i * old_pred + r) for r in range(BOX_ROWS)]
    return pairs


def reuse_summary(old_classes, new_classes, mapping, source, keep_box_rows=False):
    """One log line: which new classes start from which old ones, and from where."""
    if mapping:
        pairs = ', '.join('{} <- {}'.format(new_classes[k], old_classes[v])
                          for k, v in sorted(mapping.items()))
        reused = 'class rows reused: {}; box and objectness rows reused'.format(pairs)
    else:
        reused = 'no class rows reused; box and objectness rows {}'.format(
            'reused' if keep_box_rows else 're-initialised (GluonCV\'s reset_class)')
    return 'reset_class: {} classes ({}) from {} ({} classes); {}'.format(
        len(new_classes), ','.join(new_classes), source, len(old_classes), reused)


def transfer_fix(network):
    """What a refused ``--transfer`` file should be instead (the end of its error line)."""
    return ('pass a .params of a --network {} YOLOv3 (either backend, or GluonCV\'s) and its '
            'classes, in order, with --transfer-classes'.format(network))


def transfer_source(args):
    """What ``--transfer`` starts from: ``(path, classes, source)``.

    A model-zoo name (``yolo3_darknet53_coco``...) is found in or fetched into the model store
    as ``--pretrained True`` is (its classes are the zoo dataset's); anything else is a
    ``.params`` file whose classes ``--transfer-classes`` names, in its order.

    Raises
    ------
    ValueError
        A zoo name of another ``--network``, a zoo name GluonCV does not publish, a file
        without ``--transfer-classes``, a missing file: one line each, with the fix.
    """
    value = args.transfer.strip()
    parts = value.split('_')
    if value in model_store.SHA1 and len(parts) == 3 and parts[0] == 'yolo3':
        if parts[1] != args.network:
            raise ValueError('--transfer {} is a {} YOLOv3: pass --network {} (the body and '
                             'heads come from it)'.format(value, parts[1], parts[1]))
        try:
            path = model_store.find_or_fetch(value)
        except ValueError as e:
            raise ValueError('--transfer {}: the model-zoo file is not on this machine and {}'
                             .format(value, e)) from None
        return path, list(ZOO_CLASSES[parts[2]]), value
    if value.startswith('yolo3_') and not os.path.exists(value):
        raise ValueError('--transfer {}: GluonCV publishes no such model ({}); or pass a '
                         '.params file'.format(value, ', '.join(
                             n for n in sorted(model_store.SHA1) if n.startswith('yolo3_'))))
    if not args.transfer_classes.strip():
        raise ValueError('--transfer {}: name its classes, in its order, with '
                         '--transfer-classes a,b,c (the classes it was trained on)'.format(value))
    return value, class_names(args.transfer_classes), value


def reuse_spec(text, old_classes, new_classes):
    """``reuse_weights`` for :func:`resolve_reuse` from ``--reuse-classes``: ``new:old`` pairs
    (names or indices), or by default every new class the old list also names (none: the
    whole prediction convolution starts afresh, as GluonCV's ``reset_class`` without a
    mapping)."""
    if not text.strip():
        return {name: name for name in new_classes if name in old_classes}
    try:
        return dict(reuse_pair_list(text))
    except ValueError as e:
        raise ValueError('--reuse-classes {}'.format(e)) from None
