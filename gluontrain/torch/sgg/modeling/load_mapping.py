"""Loading a detector checkpoint into the relation model as Scene-Graph-Benchmark's
``DetectronCheckpointer.load(PRETRAINED_DETECTOR_CKPT, with_optim=False, load_mapping=...)``
(``utils/model_serialization.py``).

Each key of the model is first rewritten by the mapping (every ``source`` substring found
replaced by its ``target``; with several matching entries the last one wins, as SGB's loop),
then matched to the *longest* checkpoint key that is a suffix of the rewritten key; unmatched
keys keep their initial values. The relation head's box feature extractor and the union
feature extractor's inner extractor thus start from the detector's ``fc6``/``fc7``.
"""
import logging
from collections import OrderedDict

__all__ = ['RELATION_LOAD_MAPPING', 'align_and_update_state_dicts', 'strip_prefix_if_present',
           'load_state_dict_with_mapping']

#: ``load_mapping`` of SGB's ``relation_train_net.py`` (attributes off).
RELATION_LOAD_MAPPING = OrderedDict([
    ('roi_heads.relation.box_feature_extractor', 'roi_heads.box.feature_extractor'),
    ('roi_heads.relation.union_feature_extractor.feature_extractor',
     'roi_heads.box.feature_extractor'),
])

logger = logging.getLogger(__name__)


def align_and_update_state_dicts(model_state_dict, loaded_state_dict, load_mapping=None):
    """Copy into ``model_state_dict`` (in place) the loaded tensor of each key's longest
    suffix match after the mapping.

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
    load_mapping = load_mapping or {}
    current = sorted(model_state_dict)
    loaded = sorted(loaded_state_dict)
    matched = OrderedDict()
    for key in current:
        mapped = key
        for source, target in load_mapping.items():
            if source in key:
                mapped = key.replace(source, target)
        best, best_len = None, 0
        for cand in loaded:
            # equally long suffixes of one key are the same key: no ties to break
            if len(cand) > best_len and mapped.endswith(cand):
                best, best_len = cand, len(cand)
        if best is None:
            logger.info('NO-MATCHING of current module: %s of shape %s', key,
                        tuple(model_state_dict[key].shape))
            continue
        model_state_dict[key] = loaded_state_dict[best]
        matched[key] = best
    return matched


def strip_prefix_if_present(state_dict, prefix):
    """``state_dict`` without ``prefix`` when *every* key starts with it."""
    if not all(k.startswith(prefix) for k in state_dict):
        return state_dict
    return OrderedDict((k[len(prefix):], v) for k, v in state_dict.items())


def load_state_dict_with_mapping(model, loaded_state_dict, load_mapping=None):
    """SGB's ``load_state_dict``: strip ``module.``, align, then a strict
    ``model.load_state_dict``.

    A shape mismatch (e.g. a detector trained with another ``NUM_CLASSES``) raises
    ``ValueError`` naming the keys, instead of torch's size-mismatch traceback.

    Parameters
    ----------
    model : nn.Module
    loaded_state_dict : dict
        A checkpoint's ``model`` entry.
    load_mapping : dict, optional
        :data:`RELATION_LOAD_MAPPING` for the relation model.

    Returns
    -------
    dict
        ``{model key: loaded key}`` of the filled keys.
    """
    state = model.state_dict()
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    loaded = strip_prefix_if_present(loaded_state_dict, 'module.')
    matched = align_and_update_state_dicts(state, loaded, load_mapping)
    wrong = [(k, shapes[k], tuple(state[k].shape)) for k in matched
             if shapes[k] != tuple(state[k].shape)]
    if wrong:
        raise ValueError('checkpoint tensors of other shapes than the model (key, model, '
                         'checkpoint): {}; was the detector trained with the same '
                         'MODEL.ROI_BOX_HEAD / backbone settings?'.format(wrong[:5]))
    model.load_state_dict(state)
    return matched
