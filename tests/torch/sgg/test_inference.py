"""SGB's inference helpers: iou_types from the config, predictions merged in image order."""
import logging

from gluontrain.torch.sgg.config import get_cfg
from gluontrain.torch.sgg.inference import accumulate_predictions, iou_types_of


def test_iou_types_as_relation_train_net():
    cfg = get_cfg()
    assert iou_types_of(cfg) == ('bbox',)
    cfg.MODEL.RELATION_ON = True
    assert iou_types_of(cfg) == ('bbox', 'relations')
    cfg.MODEL.ATTRIBUTE_ON = True
    assert iou_types_of(cfg) == ('bbox', 'relations', 'attributes')


def test_accumulate_orders_by_image_index(caplog):
    # the recipe's logger may not propagate (setup_logger): listen on it directly
    logger = logging.getLogger('gluontrain.sgg.inference')
    logger.addHandler(caplog.handler)
    try:
        assert accumulate_predictions({2: 'c', 0: 'a', 1: 'b'}) == ['a', 'b', 'c']
        assert accumulate_predictions({0: 'a', 2: 'c'}) == ['a', 'c']
    finally:
        logger.removeHandler(caplog.handler)
    assert 'not a contiguous set' in caplog.text
