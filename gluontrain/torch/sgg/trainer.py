"""Scene-Graph-Benchmark's ``train()`` (``relation_train_net.py``, ``detector_pretrain_net.py``)
on gluontrain's loop (docs/faithfulness.md, "Scene-graph training")."""
import logging
import os

from ...core.defaults import HookSpec, Restored, RunPaths, build_hooks, fit
from ...core.loop import Period, TrainState
from ...core.meters import LossMeter
from ...core.writers import tensorboard_available
from ..distributed import get_rank, get_world_size, unwrap_model
from ..step import mixed_precision
from .checkpoint import FIX_DETECTOR_CKPT, FIX_WEIGHT, Checkpointer
from .hooks import SGBCheckpointHook, SGBLogHook, SGBScheduleHook
from .inference import validation_metrics, zeroshot_triplets
from .model import eval_modules as sgb_eval_modules, fix_eval_modules, frozen_norm_eval
from .modeling.load_mapping import RELATION_LOAD_MAPPING
from .modeling.predictors import slow_heads
from .plots import val_samples_hook
from .solver import make_lr_scheduler, make_optimizer
from .step import SGGStep

__all__ = ['do_train', 'PREFIX']

#: gluontrain's files in OUTPUT_DIR: ``sgg_metrics.jsonl``, ``sgg_curves.png``, ...
PREFIX = 'sgg'

_LOG = logging.getLogger('gluontrain.sgg')


def do_train(cfg, net, train_data, val_data, device, mode='relation', logger=None,
             header=(), plots=True):
    """SGB's ``train()`` of relation_train_net (``mode='relation'``) or detector_pretrain_net
    (``mode='detector'``) from the model on: optimizer, schedule, checkpointer (resume or
    starting weights), ``PRE_VAL``, then the loop until ``MAX_ITER``; ``plots=False`` draws no
    pictures. Returns the final TrainState (``scores['val']``: the last validation)."""
    logger = logger or _LOG
    relation = mode == 'relation'
    model = unwrap_model(net)
    is_main = get_rank() == 0
    eval_modules, norm_eval = (), True
    if relation:
        eval_modules, norm_eval = sgb_eval_modules(model), frozen_norm_eval(cfg)
        fix_eval_modules(eval_modules, norm_eval)
    # relation_train_net.py:55-59: IMP's relation box and union feature extractors train at
    # lr / 10 (the predictor class's SLOW_HEADS)
    optimizer = make_optimizer(cfg, model, logger,
                               slow_heads=slow_heads(cfg) if cfg.MODEL.RELATION_ON else [],
                               slow_ratio=10.0, rl_factor=float(cfg.SOLVER.IMS_PER_BATCH))
    scheduler = make_lr_scheduler(cfg, optimizer, logger)
    checkpointer = Checkpointer(cfg, model, optimizer, scheduler, cfg.OUTPUT_DIR,
                                save_to_disk=is_main, logger=logger)
    run_validation = _validation(cfg, net, train_data, val_data, logger)
    hooks = _hooks(cfg, model, optimizer, scheduler, checkpointer, train_data, val_data, device,
                   mode, run_validation, header, plots, logger)
    # every rank runs the loop (run_loop leaves the hooks that write to rank 0); rank 0
    # alone speaks for the job (the CLI's final line)
    state = TrainState(rank=get_rank(), world_size=get_world_size())
    restored = _start(cfg, checkpointer, relation, state, logger)
    if cfg.SOLVER.PRE_VAL:
        # SGB: also on a resume and with TO_VAL off; its score feeds nothing
        logger.info("Validate before training")
        run_validation()
    logger.info("Start training")
    if restored is not None:
        # the iteration-based sampler replays the draws before it and starts there
        train_data.batch_sampler.start_iter = restored.state.iteration
    # DTYPE "float16": apex AMP O1 in SGB (both tools), float16 autocast + GradScaler here
    autocast, scaler = mixed_precision(device, cfg.DTYPE == 'float16', argument='DTYPE "float16"')
    step = SGGStep(net, optimizer, cfg, device, eval_modules, clip=relation, logger=logger,
                   norm_eval=norm_eval, autocast=autocast, scaler=scaler)
    return fit(step, train_data, hooks, 0, None, state, max_iter=cfg.SOLVER.MAX_ITER,
               restored=restored)


def _validation(cfg, net, train_data, val_data, logger):
    """``() -> (names, values)``: SGB's validation, its result logged."""
    zs = [zeroshot_triplets(cfg, train_data.dataset, val_data.dataset)]

    def run_validation():
        names, values = validation_metrics(cfg, net, val_data, zeroshot=zs, logger=logger)
        logger.info("Validation Result: %.4f", values[-1])
        return names, values
    return run_validation


def _hooks(cfg, model, optimizer, scheduler, checkpointer, train_data, val_data, device, mode,
           run_validation, header, plots, logger):
    """SGB's log line, schedule and periodic checkpoint among the default hooks."""
    relation, is_main = mode == 'relation', get_rank() == 0
    paths = RunPaths(os.path.join(cfg.OUTPUT_DIR, PREFIX if relation else PREFIX + '_detector'))
    if is_main:
        paths.makedirs()
    max_iter = cfg.SOLVER.MAX_ITER
    schedule = SGBScheduleHook(scheduler, cfg, before=not relation, logger=logger)
    periodic = SGBCheckpointHook(checkpointer, cfg.SOLVER.CHECKPOINT_PERIOD, max_iter, schedule)
    spec = HookSpec(
        paths, LossMeter(['loss']), header=list(header), batch_size=cfg.SOLVER.IMS_PER_BATCH,
        log_interval=0, num_batches=len(train_data), tensorboard_interval=20,
        plots=is_main and plots,
        validate=run_validation if cfg.SOLVER.TO_VAL else None,
        period=Period(iterations=cfg.SOLVER.VAL_PERIOD),
        samples_hook=val_samples_hook(cfg, model, getattr(val_data, 'dataset', None),
                                      paths.val_samples, device)
        if is_main and plots and cfg.MODEL.RELATION_ON else None,
        curves_title='sgg {} ({})'.format(mode, os.path.basename(cfg.OUTPUT_DIR) or '.'),
        tensorboard=cfg.OUTPUT_DIR if is_main and tensorboard_available() else '')
    # the schedule and the periodic checkpoint after the validation (their slot)
    hooks = build_hooks(spec, [SGBLogHook(optimizer, max_iter, -1 if relation else 0, logger),
                               schedule, periodic])
    periodic.hooks = hooks
    return hooks


def _start(cfg, checkpointer, relation, state, logger):
    """SGB's start: the last checkpoint of ``OUTPUT_DIR`` (a :class:`Restored`), else the
    starting weights loaded with a report (None)."""
    if checkpointer.has_checkpoint():
        extra = checkpointer.load(update_schedule=cfg.SOLVER.UPDATE_SCHEDULE_DURING_LOAD,
                                  restore_scheduler=cfg.SOLVER.RESTORE_SCHEDULER)
        state.iteration = int(extra.get('iteration', 0))
        path = checkpointer.get_checkpoint_file()
        logger.info('resumed from %s at iteration %d', path, state.iteration)
        return Restored(path, {'extra': {'hooks': extra.get('hooks', {})}}, state)
    if relation:
        # SGB loads partially (the relation head's own layers are in no detector file):
        # allowed and reported; the frozen detector must get something
        checkpointer.load(cfg.MODEL.PRETRAINED_DETECTOR_CKPT or None, with_optim=False,
                          load_mapping=_load_mapping(cfg), what='MODEL.PRETRAINED_DETECTOR_CKPT',
                          fix=FIX_DETECTOR_CKPT, required=('backbone', 'roi_heads.box'))
    else:
        checkpointer.load(cfg.MODEL.WEIGHT or None, with_optim=False, what='MODEL.WEIGHT',
                          fix=FIX_WEIGHT)
    return None


def _load_mapping(cfg):
    # relation_train_net.py:62-63: relation-head extractors from the detector's box extractor
    mapping = dict(RELATION_LOAD_MAPPING)
    if cfg.MODEL.ATTRIBUTE_ON:
        for key in ('att_feature_extractor', 'union_feature_extractor.att_feature_extractor'):
            mapping['roi_heads.relation.' + key] = 'roi_heads.attribute.feature_extractor'
    return mapping

