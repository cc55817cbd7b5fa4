"""The scene-graph recipe's contract (``gluontrain.get_recipe('sgg')``, SGB's
``tools/relation_train_net.py``; the detector stage is :mod:`.detector_recipe`). ``args`` is
the Namespace or the yacs config, ``dataset`` the VG folder, ``eval_metric`` SGB's
``iou_types`` (docs/recipes.md, "The recipe contract" and "The recipes")."""
import os

from ...core import checkpoint as ckpt_io
from ...core.argtypes import check_output_dir
from ...core.writers import save_best_and_interval
from ..distributed import (process_group, get_rank, get_world_size, unwrap_model, wrap_ddp)
from ..ops import describe as describe_ops
from ..step import seed_all
from .args import OUTPUT_ARGUMENT, RESUME_ADVICE, config_from_args, parse_args
from .config import check_world_size
from .config_values import check_detector_classes
from .inference import iou_types_of, test, validation_metrics
from .launch import get_contexts, setup_logger
from .model import build_model, eval_modules, fix_eval_modules, frozen_norm_eval
from .trainer import do_train

__all__ = ['parse_args', 'get_dataset', 'get_dataloader', 'get_net', 'train', 'validate',
           'save_params', 'main', 'run', 'OUTPUT_ARGUMENT', 'RESUME_ADVICE']


def config_of(args):
    return config_from_args(args) if not hasattr(args, 'MODEL') else args


def get_dataset(dataset, args):
    """``(train_dataset, val_dataset, iou_types)``: SGB's ``VGDataset`` for
    ``DATASETS.TRAIN`` and ``DATASETS.VAL[0]``; ``dataset`` (if not None) overrides
    ``DATASETS.DATA_DIR``."""
    from .data.build import build_dataset  # pylint: disable=import-outside-toplevel
    from .data.transforms import build_transforms  # pylint: disable=import-outside-toplevel
    cfg = config_of(args)
    train_ds = build_dataset(cfg, cfg.DATASETS.TRAIN, build_transforms(cfg, True),
                             is_train=True, data_dir=dataset)[0]
    val_ds = build_dataset(cfg, cfg.DATASETS.VAL, build_transforms(cfg, False),
                           is_train=False, data_dir=dataset)[0]
    return train_ds, val_ds, iou_types_of(cfg)


def get_dataloader(net, train_dataset, val_dataset, data_shape, batch_size, num_workers,
                   args):
    """SGB's loaders: training ``SOLVER.MAX_ITER`` batches (one pass), validation; ``net`` and
    ``data_shape`` are ignored, ``batch_size`` / ``num_workers`` None take the config's."""
    from .data.build import make_loader  # pylint: disable=import-outside-toplevel
    cfg = config_of(args)
    return (make_loader(cfg, train_dataset, True, 0, batch_size, num_workers),
            make_loader(cfg, val_dataset, False, num_workers=num_workers))


def get_net(args, ctx):
    """The model of the config on ``ctx[0]`` (DDP-wrapped in a distributed run, SGB's
    ``find_unused_parameters=True``). Returns ``(net, module)``."""
    from .data.statistics import get_dataset_statistics  # pylint: disable=import-outside-toplevel
    cfg = config_of(args)
    statistics = get_dataset_statistics(cfg) if cfg.MODEL.RELATION_ON else None
    model = build_model(cfg, statistics).to(ctx[0])
    if cfg.MODEL.RELATION_ON:
        # frozen before DDP registers the parameters that need gradients (SGB's order)
        fix_eval_modules(eval_modules(model), frozen_norm_eval(cfg))
    return wrap_ddp(model, ctx[0], broadcast_buffers=False, find_unused_parameters=True), model


def validate(net, val_data, ctx, eval_metric, args=None, cfg=None, zeroshot=None,
             logger=None):
    """SGB's ``run_val``: ``(names, values)``, SGB's validation score (``val_score``) last;
    ``eval_metric`` is read from the config."""
    cfg = cfg if cfg is not None else config_of(args)
    return validation_metrics(cfg, net, val_data, zeroshot=zeroshot, logger=logger)


def save_params(net, best_map, current_map, epoch, save_interval, prefix):
    """GluonCV's ``save_params`` with ``.pth`` files (docs/recipes.md, the contract)."""
    from ..checkpoint import save_weights  # pylint: disable=import-outside-toplevel
    save_best_and_interval(lambda path: save_weights(path, unwrap_model(net)),
                           best_map, current_map, epoch, save_interval, prefix, '.pth')


def train(net, train_data, val_data, eval_metric, ctx, args):
    """The contract's ``train``: :func:`.trainer.do_train` in relation mode with ``args``'
    config (``eval_metric`` is read from it). Returns the final TrainState."""
    cfg = config_of(args)
    return do_train(cfg, net, train_data, val_data, ctx[0], 'relation',
                    header=[str(args), cfg.dump()], plots=getattr(args, 'plots', True))


def run(argv=None, mode='relation'):
    """SGB's ``main()`` of either tool: parse, config, seed, build, train, test; returns the
    TrainState, ``scores['test']`` the test results ``[(score, result_dict), ...]``."""
    desc = ("PyTorch Relation Detection Training" if mode == 'relation'
            else "PyTorch Object Detection Training")
    args = parse_args(argv, desc)
    cfg = config_from_args(args)
    if cfg.MODEL.RELATION_ON != (mode == 'relation'):
        raise ValueError('{}: MODEL.RELATION_ON is {} but this is the {} {}'.format(
            args.config_file, cfg.MODEL.RELATION_ON, mode,
            'training (use scripts/pretrain_detector.py for detector configs)'
            if mode == 'relation' else 'pretraining (use scripts/train_relation.py)'))
    if cfg.OUTPUT_DIR:
        check_output_dir(cfg.OUTPUT_DIR, 'OUTPUT_DIR',
                         'pass OUTPUT_DIR with a folder (it is created if missing)')
    ctx = get_contexts(cfg, args.local_rank)
    # SGB's --local_rank names the GPU; a job torchrun started is joined, not restarted
    with process_group(use_cuda=ctx[0].type == 'cuda', local_rank=args.local_rank):
        check_world_size(cfg, get_world_size())
        rank = get_rank()
        if rank == 0 and cfg.OUTPUT_DIR:
            os.makedirs(cfg.OUTPUT_DIR, exist_ok=True)
        logger = setup_logger(cfg.OUTPUT_DIR, rank)
        logger.info("Using %d processes", get_world_size())
        logger.info("%s", describe_ops())  # which NMS / ROIAlign kernels, and the switch
        logger.info(args)
        logger.info("Running with config:\n%s", cfg)
        if cfg.SOLVER.MAX_ITER == 0:
            logger.warning("SOLVER.MAX_ITER is 0: nothing is trained%s", "" if args.skip_test
                           else "; the test runs on the initial weights")
        if rank == 0 and cfg.OUTPUT_DIR:
            ckpt_io.atomic_write(os.path.join(cfg.OUTPUT_DIR, 'config.yml'),
                                 lambda f: f.write(cfg.dump()), mode='w')
        if cfg.SEED >= 0:
            seed_all(cfg.SEED + rank)
        train_ds, val_ds, _ = get_dataset(None, cfg)
        if mode != 'relation':
            # the relation model checks its class counts against the statistics; the detector
            # alone would train a head of the wrong size on the data without a word
            check_detector_classes(cfg, train_ds)
        net, _ = get_net(cfg, ctx)
        train_data, val_data = get_dataloader(net, train_ds, val_ds, None, None, None, cfg)
        state = do_train(cfg, net, train_data, val_data, ctx[0], mode, logger,
                         header=[str(args), cfg.dump()], plots=args.plots)
        if not args.skip_test:
            state.scores['test'] = test(cfg, net, train_ds, logger=logger)
        return state


def main(argv=None):
    """relation_train_net's ``main``: ``--config-file FILE [--data-dir D] [--skip-test]
    KEY VALUE ...``."""
    return run(argv, 'relation')
