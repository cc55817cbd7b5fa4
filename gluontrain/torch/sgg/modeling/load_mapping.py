"""Loading a checkpoint into a scene-graph model as Scene-Graph-Benchmark's
``DetectronCheckpointer.load(f, load_mapping=...)`` (``utils/model_serialization.py``), with a
report of what loaded.

Each key of the model is first rewritten by the mapping (every ``source`` substring found
replaced by its ``target``; with several matching entries the last one wins, as SGB's loop),
then matched to the *longest* checkpoint key that is a suffix of the rewritten key; unmatched
keys keep their initial values. The relation head's box feature extractor and the union
feature extractor's inner extractor thus start from the detector's ``fc6``/``fc7``.

SGB logs one ``REMATCHING!`` / ``NO-MATCHING`` line per key and then loads strictly (a shape
mismatch is torch's size-mismatch traceback). Here the load is reported as
:func:`gluontrain.torch.weights.load_state_dict_reported` reports: "loaded N of M tensors", the keys
left at their initial values grouped by prefix (SGB's NO-MATCHING keys), one line per mapping
("roi_heads.relation.box_feature_extractor.* <- roi_heads.box.feature_extractor.* (4
tensors)"), a file that fills nothing refused, shape mismatches refused in one line before
anything is copied.
"""
import collections
import logging
from collections import OrderedDict

from ...weights import apply_report, strip_ddp_prefix, tensor_shapes
from ....core.load_report import WeightsLoadError, check, compare, guess_origin

__all__ = ['RELATION_LOAD_MAPPING', 'match_keys', 'align_and_update_state_dicts',
           'load_state_dict_with_mapping', 'mapping_lines']

#: ``load_mapping`` of SGB's ``relation_train_net.py`` (attributes off).
RELATION_LOAD_MAPPING = OrderedDict([
    ('roi_heads.relation.box_feature_extractor', 'roi_heads.box.feature_extractor'),
    ('roi_heads.relation.union_feature_extractor.feature_extractor',
     'roi_heads.box.feature_extractor'),
])

logger = logging.getLogger(__name__)


def match_keys(current_keys, loaded_keys, load_mapping=None):
    """SGB's ``align_and_update_state_dicts`` matching, without copying.

    Parameters
    ----------
    current_keys : iterable of str
        The model's keys.
    loaded_keys : iterable of str
        The checkpoint's keys (``module.`` already stripped).
    load_mapping : dict, optional
        ``{model key part: checkpoint key part}`` (:data:`RELATION_LOAD_MAPPING`).

    Returns
    -------
    (OrderedDict, dict)
        ``{model key: checkpoint key}`` of the matched keys (sorted as SGB), and
        ``{model key: (source, target)}``, the mapping entry applied to each rewritten key.
    """
    load_mapping = load_mapping or {}
    loaded = sorted(loaded_keys)
    matched, applied = OrderedDict(), {}
    for key in sorted(current_keys):
        mapped = key
        for source, target in load_mapping.items():
            if source in key:
                # SGB replaces in the original key: with several entries the last one wins
                mapped = key.replace(source, target)
                applied[key] = (source, target)
        # the longest non-empty suffix; equally long suffixes of one key are the same key
        best = max((c for c in loaded if c and mapped.endswith(c)), key=len, default=None)
        if best is None:
            logger.debug('NO-MATCHING of current module: %s', key)
            continue
        matched[key] = best
    return matched, applied


def align_and_update_state_dicts(model_state_dict, loaded_state_dict, load_mapping=None):
    """Copy into ``model_state_dict`` (in place) the loaded tensor of each key's longest
    suffix match after the mapping (SGB's function, same name and effect).

    Parameters
    ----------
    model_state_dict : dict
    loaded_state_dict : dict
    load_mapping : dict, optional

    Returns
    -------
    dict
        ``{model key: loaded key}`` of the keys that were filled.
    """
    matched, _ = match_keys(model_state_dict, loaded_state_dict, load_mapping)
    for key, file_key in matched.items():
        model_state_dict[key] = loaded_state_dict[file_key]
    return matched


def mapping_lines(matched, applied, loaded):
    """One line per way model keys were filled from other names.

    ``'roi_heads.relation.box_feature_extractor.* <- roi_heads.box.feature_extractor.* (4
    tensors)'`` for each ``load_mapping`` entry used, ``'backbone.body.* <- * (N tensors,
    by suffix)'`` for keys found under a shorter name (an ImageNet body's ``layer1.0...``).

    Parameters
    ----------
    matched : dict
        ``{model key: checkpoint key}`` (:func:`match_keys`).
    applied : dict
        ``{model key: (source, target)}`` (:func:`match_keys`).
    loaded : iterable of str
        The model keys actually filled (the report's ``loaded``).

    Returns
    -------
    list of str
    """
    counts = collections.OrderedDict()
    for key in sorted(loaded):
        file_key = matched.get(key, key)
        if key in applied:
            source, target = applied[key]
            label = ('{}.* <- {}.*'.format(source, target), '')
        elif file_key != key and key.endswith(file_key):
            label = ('{}* <- *'.format(key[:len(key) - len(file_key)]), ', by suffix')
        else:
            continue
        counts[label] = counts.get(label, 0) + 1
    return ['{} ({} tensor{}{})'.format(label, n, '' if n == 1 else 's', how)
            for (label, how), n in counts.items()]


def load_state_dict_with_mapping(model, loaded_state_dict, load_mapping=None, source='checkpoint',
                                 what='checkpoint', fix='pass a checkpoint of this model',
                                 allow_partial=True, required=(), ignore=None, log=None):
    """SGB's ``load_state_dict``: strip ``module.`` (SGB's ``strip_prefix_if_present``,
    :func:`gluontrain.torch.weights.strip_ddp_prefix`), align by longest suffix after the
    mapping, then load, reporting what loaded.

    Parameters
    ----------
    model : nn.Module
    loaded_state_dict : dict
        A checkpoint's ``model`` entry.
    load_mapping : dict, optional
        :data:`RELATION_LOAD_MAPPING` for a detector checkpoint into the relation model.
    source : str
        The file, named in the report and the errors.
    what : str
        What it was given as (``'MODEL.PRETRAINED_DETECTOR_CKPT'``), to start errors.
    fix : str
        What to do instead, to end errors.
    allow_partial : bool, default True
        SGB loads partially (keys without a match keep their values): allowed and reported.
        False (a resume) refuses a file that leaves any tensor of the model unfilled or
        holds tensors the model does not use (another model: SGB's suffix matching would
        skip them silently).
    required : tuple of str
        Module prefixes the file must fill at least one tensor of (a relation training's
        frozen detector: ``('backbone', 'roi_heads.box')``).
    ignore : callable, optional
        More model keys the file may lack without being missing (beside
        BatchNorm's ``num_batches_tracked`` and the RPN's ``cell_anchors``): a Caffe2 body's
        frozen-norm statistics.
    log : logging.Logger, optional

    Returns
    -------
    gluontrain.core.load_report.LoadReport

    Raises
    ------
    WeightsLoadError
        Nothing loads; a tensor has another shape than the model's (SGB: torch's strict
        ``load_state_dict`` traceback), naming the keys; a ``required`` module gets nothing;
        or, unless ``allow_partial``, something is missing. Nothing is copied then.
    """
    log = log or logger
    if not isinstance(loaded_state_dict, dict):
        raise WeightsLoadError('{} {}: its "model" entry is a {}, not a state dict; {}'.format(
            what, source, type(loaded_state_dict).__name__, fix))
    loaded = strip_ddp_prefix(loaded_state_dict)
    own = model.state_dict()
    matched, applied = match_keys(own, loaded, load_mapping)
    # unmatched keys have no source (None), never their own name: SGB's matching decides
    full = {k: matched.get(k) for k in own}

    def ignored(k):
        # buffers a file may lack without being missing: BatchNorm's num_batches_tracked (SGB's
        # FrozenBatchNorm2d and torch < 0.4.1 have none) and maskrcnn-benchmark's anchors
        # rpn.anchor_generator.cell_anchors.N, recomputed from the config (files written
        # before they were buffers lack them)
        return (k.endswith('.num_batches_tracked') or '.cell_anchors.' in k or
                (ignore is not None and bool(ignore(k))))
    pre = compare(tensor_shapes(own), tensor_shapes(loaded), source, full, ignored)
    if pre.loaded and pre.mismatched:
        key, target_shape, file_shape = pre.mismatched[0]
        raise WeightsLoadError(
            "{} {}: {} tensor{} of other shapes than the model, e.g. '{}' {} in the file but "
            "{} in the model{}; was it trained with the same MODEL.ROI_BOX_HEAD / "
            "ROI_RELATION_HEAD / backbone settings and class counts? {}".format(
                what, source, len(pre.mismatched), '' if len(pre.mismatched) == 1 else 's',
                key, tuple(file_shape) if file_shape is not None else 'no tensor',
                tuple(target_shape), '' if pre.mismatched[0][0] == full[key] else
                " (from '{}')".format(full[key]), fix))
    for prefix in required if pre.loaded else ():
        keys = [k for k in own if k.startswith(prefix + '.')]
        if keys and not any(k.startswith(prefix + '.') for k in pre.loaded):
            origin = guess_origin(pre.file_keys)
            raise WeightsLoadError('{} {}: loaded {} of {} tensors but none of the {} of {}{}; '
                                   '{}'.format(what, source, len(pre.loaded), pre.total,
                                               len(keys), prefix, '; it looks like ' + origin
                                               if origin else '', fix))
    # that report is the load's (one comparison): refuse or fill, then log it
    check(pre, what, fix, allow_partial, allow_unexpected=allow_partial)
    apply_report(model, loaded, pre)
    log.info('%s', pre.format())
    for line in mapping_lines(matched, applied, pre.loaded):
        log.info('%s', line)
    return pre
