"""Relation predictors of Scene-Graph-Benchmark, looked up by SGB's names.

``cfg.MODEL.ROI_RELATION_HEAD.PREDICTOR`` selects one of :data:`PREDICTORS`; every predictor
is built as ``cls(cfg, in_channels, statistics)`` (SGB loads the statistics inside each
predictor; here the caller passes the dict ``get_statistics`` returns:
``{'fg_matrix', 'pred_dist', 'obj_classes', 'rel_classes', 'att_classes'}``) and called as SGB's
``forward(proposals, rel_pair_idxs, rel_labels, rel_binarys, roi_features, union_features,
logger=None) -> (obj_dists, relation_dists, add_losses)``.

``slow_heads(cfg)`` gives the parameter-name prefixes SGB trains at ``lr / 10`` for the
selected predictor (only IMP has them).
"""
from .causal import CausalAnalysisPredictor
from .imp import IMPPredictor
from .motifs import MotifPredictor
from .transformer import TransformerPredictor
from .vctree import VCTreePredictor

__all__ = ['PREDICTORS', 'build_predictor', 'slow_heads', 'MotifPredictor', 'IMPPredictor',
           'TransformerPredictor', 'CausalAnalysisPredictor', 'VCTreePredictor']

#: SGB's registry names (its class names) -> predictor classes.
PREDICTORS = {cls.__name__: cls for cls in (MotifPredictor, IMPPredictor, TransformerPredictor,
                                            CausalAnalysisPredictor, VCTreePredictor)}


def build_predictor(cfg, in_channels, statistics):
    """The predictor named by ``cfg.MODEL.ROI_RELATION_HEAD.PREDICTOR``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    in_channels : int
        ROI (object) feature size from the box feature extractor.
    statistics : dict
        SGB's dataset statistics.

    Returns
    -------
    torch.nn.Module

    Raises
    ------
    ValueError
        Unknown predictor name (lists the known ones).
    """
    name = cfg.MODEL.ROI_RELATION_HEAD.PREDICTOR
    if name not in PREDICTORS:
        raise ValueError('MODEL.ROI_RELATION_HEAD.PREDICTOR {!r} is not one of {}'.format(
            name, sorted(PREDICTORS)))
    return PREDICTORS[name](cfg, in_channels, statistics)


def slow_heads(cfg):
    """Parameter-name substrings SGB's optimizer slows down by ``slow_ratio = 10``.

    ``tools/relation_train_net.py`` lists them for ``IMPPredictor`` only: the relation
    head's box feature extractor and union feature extractor (not the predictor itself).

    Parameters
    ----------
    cfg : yacs.config.CfgNode

    Returns
    -------
    list of str
        Substrings of ``model.named_parameters()`` names, SGB's model layout
        (``roi_heads.relation.*``).
    """
    cls = PREDICTORS.get(cfg.MODEL.ROI_RELATION_HEAD.PREDICTOR)
    return list(getattr(cls, 'SLOW_HEADS', ()))
