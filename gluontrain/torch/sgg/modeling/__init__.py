"""Scene-Graph-Benchmark's model parts in plain PyTorch. The sgg-detector is the
maskrcnn-benchmark flavour of :mod:`gluontrain.torch.twostage`
(:mod:`gluontrain.torch.twostage.maskrcnn`), built from SGB's config by :mod:`.detector`
(the box head's relation mode: :mod:`.relation_box_head`); here the relation head
(:mod:`.relation_head` with :mod:`.sampling`, :mod:`.relation_features`, :mod:`.loss`, :mod:`.inference`;
predictors in :mod:`.predictors`), and :mod:`.load_mapping` for the detector checkpoint. The
relation model that assembles them is :mod:`gluontrain.torch.sgg.model`.
"""
from .detector import build_detector

__all__ = ['build_detector']
