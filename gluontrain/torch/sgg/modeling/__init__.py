"""Scene-Graph-Benchmark's model in plain PyTorch. The sgg-detector is the maskrcnn-benchmark
flavour of :mod:`gluontrain.torch.twostage` (:mod:`gluontrain.torch.twostage.maskrcnn`); here
the relation model (:mod:`.model`: box head in relation mode + :mod:`.relation_head` with
:mod:`.sampling`, :mod:`.relation_features`, :mod:`.loss`, :mod:`.inference`; predictors in
:mod:`.predictors`), and :mod:`.load_mapping` for the detector checkpoint.
"""
from ...twostage.maskrcnn import SGGDetector, build_detector
from .load_mapping import RELATION_LOAD_MAPPING, load_state_dict_with_mapping
from .model import RelationModel, build_relation_model, eval_modules, fix_eval_modules

__all__ = ['SGGDetector', 'build_detector', 'RelationModel', 'build_relation_model',
           'eval_modules', 'fix_eval_modules', 'RELATION_LOAD_MAPPING',
           'load_state_dict_with_mapping']
