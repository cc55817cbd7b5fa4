"""The detector stage of the scene-graph recipe (``gluontrain.get_recipe('sgg-detector')``):
SGB's ``tools/detector_pretrain_net.py`` — the sgg-detector (FPN Faster R-CNN with
maskrcnn-benchmark's box head) trained on the VG boxes, ``model_final.pth`` then given to the
relation training as ``MODEL.PRETRAINED_DETECTOR_CKPT``.

Same contract functions as :mod:`.recipe`; ``train``/``main`` run the detector tool's loop
(scheduler stepped before the forward, no gradient clipping, ``MODEL.WEIGHT`` loaded, box mAP
validation).
"""
from .args import OUTPUT_ARGUMENT, RESUME_ADVICE, parse_args
from .config_values import check_detector_classes
from .recipe import get_dataloader, get_dataset, get_net, save_params, validate, config_of, run
from .trainer import do_train

__all__ = ['parse_args', 'get_dataset', 'get_dataloader', 'get_net', 'train', 'validate',
           'save_params', 'main', 'OUTPUT_ARGUMENT', 'RESUME_ADVICE', 'check_detector_classes']


def train(net, train_data, val_data, eval_metric, ctx, args):
    """detector_pretrain_net's ``train()`` from the model on (see :func:`.trainer.do_train`).

    Returns
    -------
    TrainState
    """
    cfg = config_of(args)
    return do_train(cfg, net, train_data, val_data, ctx[0], 'detector',
                    header=[str(args), cfg.dump()], plots=getattr(args, 'plots', True))


def main(argv=None):
    """detector_pretrain_net's ``main``: ``--config-file FILE [--data-dir D] [--skip-test]
    KEY VALUE ...`` (a config with ``MODEL.RELATION_ON False``)."""
    return run(argv, 'detector')
