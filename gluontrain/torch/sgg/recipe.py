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
"""
import logging
import os
import sys

import torch

from ...core import checkpoint as ckpt_io
from ...core.argtypes import check_output_dir
from ...core.defaults import RunPaths, build_hooks
from ...core.hooks import restore_hooks_state
from ...core.loop import Period, TrainState, run_loop
from ...core.meters import LossMeter
from ...core.writers import LogFileHandler, save_best_and_interval, tensorboard_available
from ..distributed import (get_rank, get_world_size, init_process_group, teardown,
                           unwrap_model)
from ..step import mixed_precision, seed_all
from .args import OUTPUT_ARGUMENT, RESUME_ADVICE, config_from_args, parse_args
from .checkpoint import DETECTOR_LOAD_MAPPING, FIX_DETECTOR_CKPT, FIX_WEIGHT, Checkpointer
from .config import check_world_size
from .config_values import check_detector_classes
from .inference import iou_types_of
from .solver import make_lr_scheduler, make_optimizer
from .train import (PeriodicCheckpointHook, ScheduleHook, SGBLogHook, SGGStep,
                    fix_eval_modules, run_test, run_val)

__all__ = ['parse_args', 'get_dataset', 'get_dataloader', 'get_net', 'train', 'validate',
           'save_params', 'main', 'do_train', 'build_model', 'PREFIX', 'OUTPUT_ARGUMENT',
           'RESUME_ADVICE']

#: gluontrain's files in OUTPUT_DIR: ``sgg_metrics.jsonl``, ``sgg_curves.png``, ...
PREFIX = 'sgg'

_MAIN_ONLY = ('LogHook', 'MetricsJSONHook', 'CurvesHook', 'ProgressHook', 'TensorBoardHook')
_LOG = logging.getLogger('gluontrain.sgg')


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


def make_loader(cfg, dataset, is_train, start_iter=0, images_per_batch=None,
                num_workers=None):
    """SGB's ``make_data_loader`` for one dataset (sgg-data's samplers and collator):
    aspect-ratio grouped batches; training iteration-based (``SOLVER.MAX_ITER`` batches,
    seeded shuffles, exact from ``start_iter``), evaluation one pass.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    dataset : VGDataset
    is_train : bool
    start_iter : int
    images_per_batch : int, optional
        All processes together (default ``SOLVER.IMS_PER_BATCH`` / ``TEST.IMS_PER_BATCH``).
    num_workers : int, optional
        Default ``DATALOADER.NUM_WORKERS``.

    Returns
    -------
    torch.utils.data.DataLoader
    """
    from .data import build as data_build  # pylint: disable=import-outside-toplevel
    from .data.collate import BatchCollator  # pylint: disable=import-outside-toplevel
    world, rank = get_world_size(), get_rank()
    key = 'SOLVER.IMS_PER_BATCH' if is_train else 'TEST.IMS_PER_BATCH'
    ims = images_per_batch or (cfg.SOLVER.IMS_PER_BATCH if is_train
                               else cfg.TEST.IMS_PER_BATCH)
    if ims % world:
        raise ValueError('{} ({}) must be divisible by the number of processes ({})'.format(
            key, ims, world))
    seed = max(cfg.SEED, 0)
    sampler = data_build.make_data_sampler(dataset, is_train or world > 1, world > 1, rank,
                                           world, seed)
    batch_sampler = data_build.make_batch_data_sampler(
        dataset, sampler, [1] if cfg.DATALOADER.ASPECT_RATIO_GROUPING else [], ims // world,
        cfg.SOLVER.MAX_ITER if is_train else None, start_iter if is_train else 0)
    generator = torch.Generator()
    generator.manual_seed(seed + start_iter)
    return torch.utils.data.DataLoader(
        dataset, batch_sampler=batch_sampler,
        num_workers=cfg.DATALOADER.NUM_WORKERS if num_workers is None else num_workers,
        collate_fn=BatchCollator(cfg.DATALOADER.SIZE_DIVISIBILITY), generator=generator)


def get_dataloader(net, train_dataset, val_dataset, data_shape, batch_size, num_workers,
                   args):
    """SGB's loaders (:func:`make_loader`): training ``SOLVER.MAX_ITER`` batches of
    ``SOLVER.IMS_PER_BATCH / world`` images, validation ``TEST.IMS_PER_BATCH / world``.

    ``net`` and ``data_shape`` are ignored (the transforms come from the config);
    ``batch_size`` / ``num_workers`` of None take the config's.
    """
    cfg = _cfg(args)
    return (make_loader(cfg, train_dataset, True, 0, batch_size, num_workers),
            make_loader(cfg, val_dataset, False, num_workers=num_workers))


def build_model(cfg, statistics=None):
    """The relation model (``MODEL.RELATION_ON``) or the sgg-detector, on
    ``MODEL.DEVICE``."""
    if cfg.MODEL.RELATION_ON:
        from .modeling.model import build_relation_model  # pylint: disable=import-outside-toplevel
        model = build_relation_model(cfg, statistics)
    else:
        from ..twostage.maskrcnn import build_detector  # pylint: disable=import-outside-toplevel
        model = build_detector(cfg)
    return model.to(torch.device(cfg.MODEL.DEVICE))


def get_net(args, ctx):
    """The model of the config on ``ctx[0]`` (DDP-wrapped in a distributed run, SGB's
    ``find_unused_parameters=True``). Returns ``(net, module)``."""
    from .data.statistics import get_dataset_statistics  # pylint: disable=import-outside-toplevel
    cfg = _cfg(args)
    statistics = get_dataset_statistics(cfg) if cfg.MODEL.RELATION_ON else None
    model = build_model(cfg, statistics).to(ctx[0])
    if cfg.MODEL.RELATION_ON:
        # frozen before DDP registers the parameters that need gradients (SGB's order)
        # pylint: disable-next=import-outside-toplevel
        from .modeling.model import eval_modules as sgb_eval_modules
        from .modeling.model import frozen_norm_eval  # pylint: disable=import-outside-toplevel
        fix_eval_modules(sgb_eval_modules(model), frozen_norm_eval(cfg))
    net = model
    if get_world_size() > 1:
        net = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=None if ctx[0].type == 'cpu' else [ctx[0]],
            broadcast_buffers=False, find_unused_parameters=True)
    return net, model


#: (name, result_dict key suffix, K) of the metrics a validation reports before its score
_REPORTED = (('R@20', 'recall', 20), ('R@50', 'recall', 50), ('R@100', 'recall', 100),
             ('ngR@50', 'recall_nogc', 50), ('mR@50', 'mean_recall', 50),
             ('zR@50', 'zeroshot_recall', 50))


def _result_names(cfg, result):
    """``(names, values)`` of SGB's main metrics in a result dict (the mode's R@20/50/100,
    ngR@50, mR@50, zR@50; per-image lists averaged as SGB prints them)."""
    if not result:
        return [], []
    from .evaluation.vg_eval import eval_mode  # pylint: disable=import-outside-toplevel
    mode = eval_mode(cfg)
    names, values = [], []
    for name, key, k in _REPORTED:
        value = result.get('{}_{}'.format(mode, key), {}).get(k)
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            value = float(sum(value) / len(value)) if len(value) else float('nan')
        names.append(name)
        values.append(float(value))
    return names, values


def validate(net, val_data, ctx, eval_metric, args=None, cfg=None, zeroshot=None,
             logger=None):
    """SGB's ``run_val`` on ``val_data``: ``(names, values)``, every metric of the evaluation
    and SGB's validation score (``val_score``: mean R@100 of the mode, or box mAP) last.
    ``eval_metric`` (SGB's iou_types) is read from the config."""
    cfg = cfg if cfg is not None else _cfg(args)
    score, result = run_val(cfg, net, [val_data], zeroshot=zeroshot, logger=logger)
    names, values = _result_names(cfg, result)
    return names + ['val_score'], values + [score]


def save_params(net, best_map, current_map, epoch, save_interval, prefix):
    """GluonCV-style weights files: ``{prefix}_best.pth`` when ``current_map`` beats
    ``best_map[0]`` and ``{prefix}_{epoch:04d}_{map:.4f}.pth`` every ``save_interval``."""
    from ..checkpoint import save_weights  # pylint: disable=import-outside-toplevel
    save_best_and_interval(lambda path: save_weights(path, unwrap_model(net)),
                           best_map, current_map, epoch, save_interval, prefix, '.pth')


def _slow_heads(cfg):
    """relation_train_net.py:55-59: IMP's relation box and union feature extractors train at
    lr / 10 (the predictor class's ``SLOW_HEADS``)."""
    if not cfg.MODEL.RELATION_ON:
        return []
    from .modeling.predictors import slow_heads  # pylint: disable=import-outside-toplevel
    return slow_heads(cfg)


def do_train(cfg, net, train_data, val_data, device, mode='relation', logger=None,
             header=()):
    """SGB's ``train()`` of relation_train_net (``mode='relation'``) or detector_pretrain_net
    (``mode='detector'``) from the model on: optimizer, schedule, checkpointer (resume from
    ``last_checkpoint``, else ``PRETRAINED_DETECTOR_CKPT`` with ``load_mapping`` /
    ``MODEL.WEIGHT``), ``PRE_VAL``, then the loop until ``MAX_ITER``.

    Returns
    -------
    TrainState
        ``scores['val']`` holds the last validation; ``stop_reason`` says why it ended.
    """
    logger = logger or _LOG
    relation = mode == 'relation'
    model = unwrap_model(net)
    is_main = get_rank() == 0
    eval_modules, norm_eval = (), True
    if relation:
        # pylint: disable-next=import-outside-toplevel
        from .modeling.model import eval_modules as sgb_eval_modules, frozen_norm_eval
        eval_modules, norm_eval = sgb_eval_modules(model), frozen_norm_eval(cfg)
        fix_eval_modules(eval_modules, norm_eval)
    optimizer = make_optimizer(cfg, model, logger, slow_heads=_slow_heads(cfg),
                               slow_ratio=10.0, rl_factor=float(cfg.SOLVER.IMS_PER_BATCH))
    scheduler = make_lr_scheduler(cfg, optimizer, logger)
    checkpointer = Checkpointer(cfg, model, optimizer, scheduler, cfg.OUTPUT_DIR,
                                save_to_disk=is_main, logger=logger)
    paths = RunPaths(os.path.join(cfg.OUTPUT_DIR, PREFIX if relation else PREFIX + '_detector'))
    if is_main:
        paths.makedirs()
    max_iter = cfg.SOLVER.MAX_ITER
    schedule = ScheduleHook(scheduler, cfg, before=not relation, logger=logger)
    periodic = PeriodicCheckpointHook(checkpointer, cfg.SOLVER.CHECKPOINT_PERIOD, max_iter,
                                      schedule)

    zs = [zeroshot_triplets(cfg, train_data.dataset, val_data.dataset)]

    def run_validation():
        names, values = validate(net, val_data, [device], None, cfg=cfg, zeroshot=zs,
                                 logger=logger)
        logger.info("Validation Result: %.4f", values[-1])
        return names, values

    hooks = build_hooks(
        paths, LossMeter(['loss']), header=list(header), batch_size=cfg.SOLVER.IMS_PER_BATCH,
        log_interval=0, num_batches=len(train_data),
        recipe_hooks=[SGBLogHook(optimizer, max_iter, -1 if relation else 0, logger)],
        validate_fn=run_validation if cfg.SOLVER.TO_VAL else None,
        val_period=Period(iterations=cfg.SOLVER.VAL_PERIOD),
        samples_hook=_samples_hook(cfg, model, val_data, paths, device) if is_main else None,
        curves_title='sgg {} ({})'.format(mode, os.path.basename(cfg.OUTPUT_DIR) or '.'),
        tensorboard=cfg.OUTPUT_DIR if is_main and tensorboard_available() else '',
        tensorboard_interval=20,
        plots=is_main)
    if not is_main:
        hooks = [h for h in hooks if type(h).__name__ not in _MAIN_ONLY]
    # after the validation (the plateau schedule reads it), before the periodic checkpoint
    names = [type(h).__name__ for h in hooks]
    at = names.index('ValidationHook') + 1 if 'ValidationHook' in names else \
        names.index('SGBLogHook') + 1
    hooks[at:at] = [schedule, periodic]
    periodic.hooks = hooks

    state = TrainState()
    # every rank runs the loop; rank 0 alone speaks for the job (the CLI's final line)
    state.rank, state.world_size = get_rank(), get_world_size()
    if checkpointer.has_checkpoint():
        extra = checkpointer.load(update_schedule=cfg.SOLVER.UPDATE_SCHEDULE_DURING_LOAD,
                                  restore_scheduler=cfg.SOLVER.RESTORE_SCHEDULER)
        state.iteration = int(extra.get('iteration', 0))
        restore_hooks_state(hooks, {'extra': {'hooks': extra.get('hooks', {})}})
        state.resumed_from = state.last_checkpoint = checkpointer.get_checkpoint_file()
        logger.info('resumed from %s at iteration %d', state.resumed_from, state.iteration)
    elif relation:
        # SGB loads partially (the relation head's own layers are in no detector file):
        # allowed and reported; the frozen detector must get something
        checkpointer.load(cfg.MODEL.PRETRAINED_DETECTOR_CKPT or None, with_optim=False,
                          load_mapping=_load_mapping(cfg),
                          what='MODEL.PRETRAINED_DETECTOR_CKPT', fix=FIX_DETECTOR_CKPT,
                          required=('backbone', 'roi_heads.box'))
    else:
        checkpointer.load(cfg.MODEL.WEIGHT or None, with_optim=False, what='MODEL.WEIGHT',
                          fix=FIX_WEIGHT)
    if cfg.SOLVER.PRE_VAL:
        # SGB: also on a resume and with TO_VAL off; its score feeds nothing
        logger.info("Validate before training")
        run_validation()
    logger.info("Start training")
    if state.iteration:
        # the iteration-based sampler replays the draws before it and starts there
        train_data.batch_sampler.start_iter = state.iteration
        state.resume_batch = state.iteration
    # DTYPE "float16": apex AMP O1 in SGB (both tools), float16 autocast + GradScaler here
    autocast, scaler = mixed_precision(device, cfg.DTYPE == 'float16',
                                       argument='DTYPE "float16"')
    step = SGGStep(net, optimizer, cfg, device, eval_modules, clip=relation, logger=logger,
                   norm_eval=norm_eval, autocast=autocast, scaler=scaler)
    state = run_loop(step, train_data, hooks, 0, None, state, max_iter=max_iter)
    if state.nonfinite:
        raise FloatingPointError(state.stop_reason)
    return state


def _load_mapping(cfg):
    mapping = dict(DETECTOR_LOAD_MAPPING)
    if cfg.MODEL.ATTRIBUTE_ON:
        mapping["roi_heads.relation.att_feature_extractor"] = \
            "roi_heads.attribute.feature_extractor"
        mapping["roi_heads.relation.union_feature_extractor.att_feature_extractor"] = \
            "roi_heads.attribute.feature_extractor"
    return mapping


def _samples_hook(cfg, model, val_data, paths, device):
    if not cfg.MODEL.RELATION_ON:
        return None
    try:
        from .plots import val_samples_hook  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    return val_samples_hook(cfg, model, getattr(val_data, 'dataset', None), paths.val_samples,
                            device)


def train(net, train_data, val_data, eval_metric, ctx, args):
    """The contract's ``train``: :func:`do_train` in relation mode with ``args``' config.

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
                    header=[str(args), cfg.dump()])


def get_contexts(cfg, local_rank=0):
    """``MODEL.DEVICE``: ``cuda:<local_rank>`` for 'cuda' (an error without CUDA), else the
    CPU."""
    if cfg.MODEL.DEVICE.startswith('cuda'):
        if not torch.cuda.is_available():
            raise ValueError("MODEL.DEVICE is 'cuda' but CUDA is not available: pass "
                             "MODEL.DEVICE cpu")
        return [torch.device('cuda', local_rank)]
    return [torch.device(cfg.MODEL.DEVICE)]


def init_distributed(local_rank, cfg):
    """SGB's process group from torchrun's environment when ``WORLD_SIZE > 1``: NCCL on
    CUDA, gloo on the CPU (SGB: NCCL only). Returns whether one was started."""
    if int(os.environ.get('WORLD_SIZE', '1')) <= 1 or torch.distributed.is_initialized():
        return False
    cuda = cfg.MODEL.DEVICE.startswith('cuda')
    if cuda:
        torch.cuda.set_device(local_rank)
    # with a timeout and a watchdog: a stopped rank ends the job in one line
    init_process_group('nccl' if cuda else 'gloo')
    return True


def setup_logger(output_dir, rank, name='log.txt'):
    """SGB's ``setup_logger``: the 'gluontrain.sgg' logger to stdout and
    ``OUTPUT_DIR/log.txt`` on rank 0."""
    logger = logging.getLogger('gluontrain.sgg')
    logger.setLevel(logging.INFO)
    if rank != 0 or getattr(logger, '_sgg_setup', None) == output_dir:
        return logger
    for h in list(logger.handlers):
        logger.removeHandler(h)
        h.close()
    fmt = logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s")
    handlers = [logging.StreamHandler()]
    if output_dir:
        # SGB appends to log.txt; a full disk is one error naming the file (core.writers)
        handlers.append(LogFileHandler(os.path.join(output_dir, name), mode='a'))
    for h in handlers:
        h.setFormatter(fmt)
        logger.addHandler(h)
    logger.propagate = False
    logger._sgg_setup = output_dir  # pylint: disable=protected-access
    return logger


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
    started = init_distributed(args.local_rank, cfg)
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
                         header=[str(args), cfg.dump()])
        if not args.skip_test:
            state.scores['test'] = test(cfg, net, train_ds, logger=logger)
        return state
    finally:
        if started:
            # barrier (after a success), destroy, and a pause for gloo's threads: a rank that
            # exited at once aborted now and then (SIGABRT, torch.distributed.teardown)
            teardown(ok=sys.exc_info()[0] is None)


def zeroshot_triplets(cfg, train_dataset, eval_dataset):
    """Zero-shot triplets of ``eval_dataset`` for zR@K: ``TEST.RELATION.ZERO_SHOT_FILE``
    (computed and written there when missing), else computed from the training split
    (SGB ships a file for VG150's test split). None without relations."""
    if not cfg.MODEL.RELATION_ON or train_dataset is None:
        return None
    from .evaluation import zeroshot  # pylint: disable=import-outside-toplevel
    base = getattr(train_dataset, 'datasets', [train_dataset])[0]
    if cfg.TEST.RELATION.ZERO_SHOT_FILE:
        return zeroshot.load_or_compute_zeroshot_triplets(cfg.TEST.RELATION.ZERO_SHOT_FILE,
                                                          base, eval_dataset)
    return zeroshot.compute_zeroshot_triplets(base, eval_dataset)


def test(cfg, net, train_dataset=None, data_dir=None, logger=None):
    """SGB's ``run_test`` on ``DATASETS.TEST`` (loaders built here): ``[(score,
    result_dict)]`` per test dataset; ``train_dataset`` gives the zero-shot triplets."""
    from .data.build import build_dataset  # pylint: disable=import-outside-toplevel
    from .data.transforms import build_transforms  # pylint: disable=import-outside-toplevel
    datasets = build_dataset(cfg, cfg.DATASETS.TEST, build_transforms(cfg, False),
                             is_train=False, data_dir=data_dir)
    loaders = [make_loader(cfg, ds, False) for ds in datasets]
    return run_test(cfg, net, loaders, logger=logger,
                    zeroshot=[zeroshot_triplets(cfg, train_dataset, ds) for ds in datasets])


def main(argv=None):
    """relation_train_net's ``main``: ``--config-file FILE [--data-dir D] [--skip-test]
    KEY VALUE ...``."""
    return run(argv, 'relation')
