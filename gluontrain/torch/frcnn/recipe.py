"""The two-stage recipe's contract (``gluontrain.get_recipe('frcnn')``): seamseg's
``scripts/train_detection.py`` ``main`` split as the other recipes (docs/recipes.md)."""
import os

import torch

from ...core import checkpoint as ckpt_io
from ...core.argtypes import check_input_file, check_output_dir, path_problem
from ...core.defaults import HookSpec, Restored, RunPaths, build_hooks, fit
from ...core.loop import Period, TrainState
from ...core.meters import LossMeter
from ...core.writers import save_best_and_interval, tensorboard_available
from ..checkpoint import (get_torch_rng_states, restore_checkpoint, save_checkpoint,
                          save_weights, set_torch_rng_states)
from ..distributed import (process_group, TorchComm, get_rank, get_world_size, unwrap_model,
                           wrap_ddp)
from ..ops import describe as describe_ops
from ..step import seed_all
from . import log as logging
from .args import parse_args
from .config import check_training_config, config_to_string, load_config
from .data import make_dataloaders, make_dataset, make_transforms
from .hooks import SeamsegCheckpointHook, SeamsegLogHook, SeamsegScheduleHook
from .model import LOSS_NAMES, make_model
from .optim import make_optimizer
from .plots import val_samples_hook
from .seamseg_loops import validate as seamseg_validate
from .snapshot import pre_train_from_snapshots, resume_from_snapshot
from .step import make_step

__all__ = ['parse_args', 'get_dataset', 'get_dataloader', 'get_net', 'train', 'validate',
           'save_params', 'main', 'PREFIX', 'coco_gt_file']

#: Name of gluontrain's files in the log dir (``frcnn_last.ckpt``, ``frcnn_metrics.jsonl``...).
PREFIX = 'frcnn'


def coco_gt_file(dataset, config, root=None):
    """The COCO ground truth of the validation: a COCO dataset's own json, else
    ``[dataloader] coco_gt`` (seamseg's ISS setting), else ``{root}/coco/{val_set}.json``
    when it exists (what ``make_synthetic_data.py iss`` writes)."""
    dl = config['dataloader']
    path = getattr(dataset, 'annotation_file', None) or dl.get('coco_gt')
    if not path and root is not None:
        guess = os.path.join(os.path.expanduser(root), 'coco', dl['val_set'] + '.json')
        path = guess if os.path.isfile(guess) else None
    if not path:
        raise ValueError('ISS data needs [dataloader] coco_gt = the COCO json of the '
                         'validation split (seamseg validates with pycocotools)')
    problem = path_problem(path)
    if problem:
        raise FileNotFoundError('[dataloader] coco_gt = {} {}: give the COCO json '
                                'of the validation split'.format(path, problem))
    return path


def get_dataset(dataset, args):
    """``(train_dataset, val_dataset, coco_gt)``: seamseg's ISS or COCO datasets of the data
    root ``dataset`` and the validation's ground-truth json (the contract's ``eval_metric``)."""
    config = load_config(args.config)
    dl = config['dataloader']
    train_tf, val_tf = make_transforms(dl)
    train_ds = make_dataset(dataset, dl['train_set'], train_tf)
    val_ds = make_dataset(dataset, dl['val_set'], val_tf)
    return train_ds, val_ds, coco_gt_file(val_ds, config, dataset)


def get_dataloader(net, train_dataset, val_dataset, data_shape, batch_size, num_workers, args):
    """seamseg's loaders (aspect-ratio batch samplers, one shard per process); ``net`` and
    ``data_shape`` are ignored, ``batch_size`` / ``num_workers`` None take the ``.ini``'s."""
    return make_dataloaders(load_config(args.config), args.data, get_rank(), get_world_size(),
                            datasets=(train_dataset, val_dataset), batch_size=batch_size,
                            num_workers=num_workers)


def get_net(args, ctx):
    """seamseg's ``make_model`` for the data root's classes, ``--pre_train`` snapshots loaded,
    on ``ctx[0]`` (DDP when distributed); returns ``(net, bare module)``."""
    config = load_config(args.config)
    dl = config['dataloader']
    ds = make_dataset(args.data, dl['train_set'], None)
    model = make_model(config, ds.num_thing, ds.num_stuff)
    if args.pre_train:
        pre_train_from_snapshots(model, args.pre_train)
    model = wrap_ddp(model, ctx[0], find_unused_parameters=True)
    return model, unwrap_model(model)


def validate(net, val_data, ctx, eval_metric, **varargs):
    """seamseg's validation against the ground-truth json ``eval_metric``:
    ``(['det_map'], [ap])``; ``varargs`` go to :func:`.seamseg_loops.validate`."""
    kw = {'epoch': 0, 'num_epochs': 1, 'global_step': 0, 'log_interval': 10 ** 9}
    kw.update(varargs)
    weights = kw.pop('loss_weights', (1., 1., 1., 1.))
    det_map = seamseg_validate(net, val_data, weights, coco_gt=eval_metric, device=ctx[0], **kw)
    return ['det_map'], [float(det_map)]


def save_params(net, best_map, current_map, epoch, save_interval, prefix):
    """GluonCV's ``save_params`` with ``.pth`` files (docs/recipes.md, the contract)."""
    save_best_and_interval(lambda path: save_weights(path, unwrap_model(net)), best_map,
                           current_map, epoch, save_interval, prefix, '.pth')


def _summary(args):
    logdir = args.log_dir if args.tensorboard is None else args.tensorboard
    if not logdir:
        return ''
    if not tensorboard_available():
        if args.tensorboard:
            raise ValueError('--tensorboard {} needs tensorboardX: pip install tensorboardX'
                             .format(args.tensorboard))
        return ''
    return logdir


def train(net, train_data, val_data, eval_metric, ctx, args):
    """seamseg's training on gluontrain's loop and hooks; ``eval_metric`` is the validation's
    COCO json, ``--resume`` a ``frcnn_last.ckpt`` or a seamseg snapshot (docs/checkpoints.md,
    "seamseg"). Returns the final TrainState."""
    config = load_config(args.config)
    model, device = unwrap_model(net), ctx[0]
    comm = TorchComm()
    optimizer, scheduler, batch_update, epochs = make_optimizer(config, model, len(train_data))
    weights = config['optimizer'].getstruct('loss_weights')
    hooks = _hooks(net, optimizer, scheduler, batch_update, epochs, train_data, val_data,
                   eval_metric, ctx, args, config, comm)
    state, start_epoch, restored = None, 0, None
    if args.resume:
        snapshot = next(h for h in hooks if isinstance(h, SeamsegCheckpointHook))
        kind, result = ckpt_io.resume_or_load(
            args.resume, lambda p: restore_checkpoint(p, model, optimizer), snapshot.resume,
            ckpt_io.TORCH_WEIGHTS)
        if kind == ckpt_io.CHECKPOINT:
            restored = Restored(args.resume, *result)
        else:
            start_epoch, state = result
    return fit(make_step(net, optimizer, device, weights), train_data, hooks, start_epoch,
               epochs, state, comm=comm, restored=restored)


def _hooks(net, optimizer, scheduler, batch_update, epochs, train_data, val_data, eval_metric,
           ctx, args, config, comm):
    """seamseg's schedule, log lines and snapshot among the default hooks."""
    model, gen = unwrap_model(net), config['general']
    weights = config['optimizer'].getstruct('loss_weights')
    paths = RunPaths(os.path.join(args.log_dir, PREFIX)).makedirs()
    log_hook = SeamsegLogHook(optimizer, weights, len(train_data), epochs,
                              gen.getint('log_interval'), None)
    schedule_hook = SeamsegScheduleHook(net, scheduler, train_data.batch_sampler, batch_update)

    def run_validation():
        names, values = validate(net, val_data, ctx, eval_metric, loss_weights=weights,
                                 epoch=schedule_hook.state.epoch, num_epochs=epochs,
                                 global_step=schedule_hook.state.iteration,
                                 log_interval=gen.getint('log_interval'))
        net.train()
        return names, values

    recipe_hooks = [schedule_hook, log_hook, SeamsegCheckpointHook(
        args.log_dir, net, optimizer, config_to_string(config), log_hook)]
    spec = HookSpec(
        paths, LossMeter(LOSS_NAMES), header=[str(args), config_to_string(config), describe_ops()],
        batch_size=train_data.batch_sampler.batch_size, log_interval=0,
        num_batches=len(train_data), validate=run_validation,
        period=Period(epochs=gen.getint('val_interval')),
        save_params=(lambda best, current, index, interval: save_params(
            net, best, current, index, interval, paths.prefix)),
        checkpoint=lambda st, hooks_state: save_checkpoint(
            paths.last_checkpoint, model, optimizer, None, st.epoch, st.iteration, st.best,
            vars(args), extra={'hooks': hooks_state}),
        samples_hook=val_samples_hook(model, val_data.dataset, paths.val_samples, ctx[0]),
        plots=getattr(args, 'plots', True),
        curves_title='frcnn (seamseg) {}'.format(os.path.basename(args.config)),
        tensorboard=_summary(args),
        tensorboard_interval=gen.getint('log_interval'))
    return build_hooks(spec, recipe_hooks, comm=comm,
                       rank_state=(get_torch_rng_states, set_torch_rng_states))


def get_contexts(args):
    """``cuda:<local_rank>`` when CUDA is available, else the CPU."""
    if torch.cuda.is_available():
        return [torch.device('cuda', args.local_rank)]
    return [torch.device('cpu')]


def main(argv=None):
    """seamseg's ``main``: parse, log to ``{log_dir}/training.log`` (``eval.log`` with
    ``--eval``), build, train (or validate once, into ``scores['val']``); returns the TrainState.
    """
    args = parse_args(argv)
    # seamseg's --local_rank names the GPU; a job torchrun started is joined, not restarted
    with process_group(use_cuda=torch.cuda.is_available(), local_rank=args.local_rank):
        if args.seed is not None:
            seed_all(args.seed + get_rank())
        # a bad config or output folder fails before anything is written or built
        check_training_config(load_config(args.config), args.config)
        check_output_dir(args.log_dir, '--log_dir')
        if args.resume:
            check_input_file(args.resume, '--resume', 'pass the frcnn_last.ckpt or '
                             'model_last.pth.tar a run wrote in its --log_dir')
        if get_rank() == 0:
            logging.init(args.log_dir, 'eval' if args.eval else 'training')
        ctx = get_contexts(args)
        train_dataset, val_dataset, eval_metric = get_dataset(args.data, args)
        net, _ = get_net(args, ctx)
        train_data, val_data = get_dataloader(net, train_dataset, val_dataset, None, None,
                                              None, args)
        if args.eval:
            if args.resume:
                resume_from_snapshot(unwrap_model(net), args.resume)
            state = TrainState()
            state.scores['val'] = validate(net, val_data, ctx, eval_metric)
            return state
        return train(net, train_data, val_data, eval_metric, ctx, args)
