"""The contract's functions of the scene-graph recipe (``gluontrain.get_recipe('sgg')``,
SGB's ``tools/relation_train_net.py``) and of its detector stage (``'sgg-detector'``,
``tools/detector_pretrain_net.py``, module :mod:`.detector_recipe`).

``dataset`` is the VG folder (``DATASETS.DATA_DIR``; None keeps the config's); the
configuration is the yacs config of ``args`` (:func:`.args.config_from_args`), recomputed
where needed (nothing is written into ``args``). ``eval_metric`` is SGB's ``iou_types``.

Training is iteration-based as SGB (``SOLVER.MAX_ITER``): the training loader is one pass
over the data (SGB's aspect-ratio grouped batches), re-iterated by ``run_loop(max_iter=...)``
as SGB's ``IterationBasedBatchSampler`` re-iterates its batch sampler; its batch sampler can
skip the batches a resumed pass already did (:mod:`gluontrain.torch.passes`), so a resume
from ``last_checkpoint`` continues bit-identically.

The pieces: the model in :mod:`.model`, the step in :mod:`.step`, the hooks in :mod:`.hooks`,
SGB's ``train()`` in :mod:`.trainer`, ``run_val`` / ``run_test`` in :mod:`.inference`, the
process set-up (device, process group, logger) in :mod:`.launch`.
"""
import os
import sys

from ...core import checkpoint as ckpt_io
from ...core.argtypes import check_output_dir
from ...core.writers import save_best_and_interval
from ..distributed import (get_rank, get_world_size, init_distributed, teardown, unwrap_model,
                           wrap_ddp)
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


def _cfg(args):
    return config_from_args(args) if not hasattr(args, 'MODEL') else args


def get_dataset(dataset, args):
    """``(train_dataset, val_dataset, iou_types)``: SGB's ``VGDataset`` for
    ``DATASETS.TRAIN`` and ``DATASETS.VAL[0]`` with SGB's transforms.

    Parameters
    ----------
    dataset : str or None
        The VG folder (overrides ``DATASETS.DATA_DIR``).
    args : argparse.Namespace or yacs.config.CfgNode
    """
    from .data.build import build_dataset  # pylint: disable=import-outside-toplevel
    from .data.transforms import build_transforms  # pylint: disable=import-outside-toplevel
    cfg = _cfg(args)
    train_ds = build_dataset(cfg, cfg.DATASETS.TRAIN, build_transforms(cfg, True),
                             is_train=True, data_dir=dataset)[0]
    val_ds = build_dataset(cfg, cfg.DATASETS.VAL, build_transforms(cfg, False),
                           is_train=False, data_dir=dataset)[0]
    return train_ds, val_ds, iou_types_of(cfg)


def get_dataloader(net, train_dataset, val_dataset, data_shape, batch_size, num_workers,
                   args):
    """SGB's loaders (:func:`.data.build.make_loader`): training ``SOLVER.MAX_ITER`` batches of
    ``SOLVER.IMS_PER_BATCH / world`` images, validation ``TEST.IMS_PER_BATCH / world``.

    ``net`` and ``data_shape`` are ignored (the transforms come from the config);
    ``batch_size`` / ``num_workers`` of None take the config's.
    """
    from .data.build import make_loader  # pylint: disable=import-outside-toplevel
    cfg = _cfg(args)
    return (make_loader(cfg, train_dataset, True, 0, batch_size, num_workers),
            make_loader(cfg, val_dataset, False, num_workers=num_workers))


def get_net(args, ctx):
    """The model of the config on ``ctx[0]`` (DDP-wrapped in a distributed run, SGB's
    ``find_unused_parameters=True``). Returns ``(net, module)``."""
    from .data.statistics import get_dataset_statistics  # pylint: disable=import-outside-toplevel
    cfg = _cfg(args)
    statistics = get_dataset_statistics(cfg) if cfg.MODEL.RELATION_ON else None
    model = build_model(cfg, statistics).to(ctx[0])
    if cfg.MODEL.RELATION_ON:
        # frozen before DDP registers the parameters that need gradients (SGB's order)
        fix_eval_modules(eval_modules(model), frozen_norm_eval(cfg))
    return wrap_ddp(model, ctx[0], broadcast_buffers=False, find_unused_parameters=True), model


def validate(net, val_data, ctx, eval_metric, args=None, cfg=None, zeroshot=None,
             logger=None):
    """SGB's ``run_val`` on ``val_data``: ``(names, values)``, every metric of the evaluation
    and SGB's validation score (``val_score``: mean R@100 of the mode, or box mAP) last.
    ``eval_metric`` (SGB's iou_types) is read from the config."""
    cfg = cfg if cfg is not None else _cfg(args)
    return validation_metrics(cfg, net, val_data, zeroshot=zeroshot, logger=logger)


def save_params(net, best_map, current_map, epoch, save_interval, prefix):
    """GluonCV-style weights files: ``{prefix}_best.pth`` when ``current_map`` beats
    ``best_map[0]`` and ``{prefix}_{epoch:04d}_{map:.4f}.pth`` every ``save_interval``."""
    from ..checkpoint import save_weights  # pylint: disable=import-outside-toplevel
    save_best_and_interval(lambda path: save_weights(path, unwrap_model(net)),
                           best_map, current_map, epoch, save_interval, prefix, '.pth')


def train(net, train_data, val_data, eval_metric, ctx, args):
    """The contract's ``train``: :func:`.trainer.do_train` in relation mode with ``args``'
    config.

    Parameters
    ----------
    net : torch.nn.Module or DistributedDataParallel
    train_data, val_data : DataLoader
        From :func:`get_dataloader`.
    eval_metric : tuple of str
        SGB's ``iou_types`` (read from the config; kept for the contract).
    ctx : list of torch.device
    args : argparse.Namespace

    Returns
    -------
    TrainState
    """
    cfg = _cfg(args)
    return do_train(cfg, net, train_data, val_data, ctx[0], 'relation',
                    header=[str(args), cfg.dump()], plots=getattr(args, 'plots', True))


def run(argv=None, mode='relation'):
    """SGB's ``main()`` of either tool: parse, config, seed, build, train, test.

    Returns
    -------
    TrainState
        ``scores['test']`` holds the test results ``[(score, result_dict), ...]``.
    """
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
    started = get_world_size() == 1 and init_distributed(
        use_cuda=ctx[0].type == 'cuda', local_rank=args.local_rank).world_size > 1
    try:
        check_world_size(cfg, get_world_size())
        rank = get_rank()
        if rank == 0 and cfg.OUTPUT_DIR:
            os.makedirs(cfg.OUTPUT_DIR, exist_ok=True)
        logger = setup_logger(cfg.OUTPUT_DIR, rank)
        logger.info("Using %d processes", get_world_size())
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
    finally:
        if started:
            # barrier (after a success), destroy, and a pause for gloo's threads: a rank that
            # exited at once aborted now and then (SIGABRT, torch.distributed.teardown)
            teardown(ok=sys.exc_info()[0] is None)


def main(argv=None):
    """relation_train_net's ``main``: ``--config-file FILE [--data-dir D] [--skip-test]
    KEY VALUE ...``."""
    return run(argv, 'relation')
