"""GluonCV's YOLOv3 recipe on MXNet: the contract of docs/recipes.md with the reference's
signatures (differences: docs/faithfulness.md, "YOLOv3 (GluonCV ...)")."""
import os
import warnings

import mxnet as mx
from mxnet import gluon

from gluoncv import utils as gutils
from gluoncv.utils import LRScheduler, LRSequential

from ...core import checkpoint as ckpt_io
from ...core.defaults import Restored, RunPaths, fit
from ...core.hooks import get_logger
from ...core.loop import TrainState
from ...core.meters import LossMeter
from ...core.writers import save_best_and_interval
from ...yolo3.args import (RESUME_MUST_MATCH, check_resume_position, check_weight_files,
                           lr_schedule, saved_args, weights_to_load)
from ...yolo3.hooks import gluoncv_hooks
from .. import blobs
from ..context import get_contexts
from ..distributed import HorovodComm, horovod_contexts, import_horovod, quiet_other_ranks
from .args import check_args, parse_args
from .data import get_dataloader, get_dataset
from .hooks import recipe_hooks
from .model import get_net
from .plots import raw_val_dataset, val_samples_hook
from .step import LOSS_NAMES, YOLOv3Step
from .weights import check_params_bytes, load_params, read_params

__all__ = ['parse_args', 'get_dataset', 'get_dataloader', 'get_net', 'train', 'validate',
           'save_params', 'main', 'get_lr_scheduler', 'load_weights', 'save_checkpoint',
           'restore_checkpoint', 'export_model', 'batches_per_epoch']

WEIGHTS_FIX = ('pass a .params file written by a run with the same --network and --dataset '
               '(its {prefix}_best.params or {prefix}_EPOCH_MAP.params, or a GluonCV model-zoo '
               'yolo3 .params), or its {prefix}_last.ckpt checkpoint to --resume')


def save_params(net, best_map, current_map, epoch, save_interval, prefix):
    """GluonCV's ``save_params`` (docs/recipes.md, the contract), written atomically:
    ``best_map`` starts at 0, so a score of 0.0 never saves a best; interval files from epoch 0.
    """
    save_best_and_interval(
        lambda path: ckpt_io.atomic_save_file(path, net.save_parameters),
        best_map, current_map, epoch, save_interval, prefix, '.params')


def validate(net, val_data, ctx, eval_metric, comm=None):
    """GluonCV's ``validate`` (NMS 0.45 / top-400, boxes clipped): ``(names, values)``. With
    several ranks each runs its contiguous shard and rank 0 scores the gathered results in
    the split's order (docs/faithfulness.md, YOLOv3 row 15)."""
    eval_metric.reset()
    net.set_nms(nms_thresh=0.45, nms_topk=400)
    mx.nd.waitall()
    net.hybridize()
    distributed = comm is not None and comm.world_size > 1
    records = []
    for batch in val_data:
        data = gluon.utils.split_and_load(batch[0], ctx_list=ctx, batch_axis=0, even_split=False)
        label = gluon.utils.split_and_load(batch[1], ctx_list=ctx, batch_axis=0, even_split=False)
        det_bboxes, det_ids, det_scores, gt_bboxes, gt_ids, gt_difficults = [], [], [], [], [], []
        for x, y in zip(data, label):
            ids, scores, bboxes = net(x)
            det_ids.append(ids)
            det_scores.append(scores)
            det_bboxes.append(bboxes.clip(0, batch[0].shape[2]))
            gt_ids.append(y.slice_axis(axis=-1, begin=4, end=5))
            gt_bboxes.append(y.slice_axis(axis=-1, begin=0, end=4))
            gt_difficults.append(y.slice_axis(axis=-1, begin=5, end=6) if y.shape[-1] > 5 else None)
        update = (det_bboxes, det_ids, det_scores, gt_bboxes, gt_ids, gt_difficults)
        if distributed:
            records.append([[None if a is None else a.asnumpy() for a in arrays]
                            for arrays in update])
        else:
            eval_metric.update(*update)
    if distributed:
        gathered = comm.allgather_object(records)
        result = None
        # rank 0 alone scores: COCODetectionMetric writes (and removes) a json file beside
        # --save-prefix, which several ranks on a shared filesystem would race for
        if comm.rank == 0:
            for rank_records in gathered:
                for update in rank_records:
                    eval_metric.update(*update)
            result = eval_metric.get()
        return comm.broadcast_object(result, root=0)
    return eval_metric.get()


def get_lr_scheduler(args, num_batches=None):
    """Linear warm-up then ``--lr-mode``, over ``num_batches`` updates per epoch (default
    ``num_samples // batch_size``; docs/faithfulness.md, YOLOv3 row 1)."""
    if num_batches is None:
        num_batches = args.num_samples // args.batch_size
    return lr_schedule(args, num_batches, LRScheduler, LRSequential)


def _sampler(train_data):
    return getattr(train_data, '_batch_sampler', None)


def batches_per_epoch(train_data, args, batch_size):
    """Updates per epoch for the LR schedule: ``num_samples // batch_size`` (the reference),
    or with a sharded loader (``--horovod``) the per-rank batches of one rank's shard."""
    shard = getattr(train_data, 'shard_sampler', None)
    if shard is None:
        return args.num_samples // args.batch_size
    return len(shard) // batch_size


def save_checkpoint(path, net, trainer, train_data, state, args, hooks_state):
    """Write the full checkpoint of a finished epoch, with the sampler's leftovers
    (docs/recipes.md, "Checkpoints")."""
    sampler = _sampler(train_data)
    extra = {'hooks': hooks_state,
             'sampler_prev': list(getattr(sampler, '_prev', []) or [])}
    # both streamed into the file as it is written: never whole in memory (the peak memory of
    # the whole run was these copies)
    return ckpt_io.save_checkpoint(
        path, params=blobs.params_blob(net), trainer=blobs.trainer_states_blob(trainer, path),
        epoch=state.epoch, iteration=state.iteration, best_score=state.best, args=args,
        extra=extra)


def restore_checkpoint(path, net, trainer, train_data, ctx, args=None, num_batches=None,
                       reports=None):
    """Load a full checkpoint into ``net``/``trainer``, the sampler's leftovers and the RNG;
    returns ``(payload, state)``, the weights report appended to ``reports``. With ``args``,
    :data:`RESUME_MUST_MATCH` is checked and the LR schedule, ``wd`` and ``momentum`` are
    rebuilt from them (docs/faithfulness.md, YOLOv3 row 3)."""
    payload = ckpt_io.load_checkpoint(path)
    ckpt_io.refuse_other_writer(payload, path, 'mxnet')
    if args is not None:
        check_resume_position(payload['epoch'] + 1, args, path)
    changes = [] if args is None else ckpt_io.resume_changes(
        saved_args(payload['args']), args, RESUME_MUST_MATCH, path,
        flag=lambda name: '--' + name.replace('_', '-'))
    check_params_bytes(payload['params'], path, '--resume')
    arrays = mx.nd.load_frombuffer(payload['params'])
    report = load_params(net, path, '--resume', 'pass the {prefix}_last.ckpt of a run with the '
                         'same --network and --dataset', ctx=ctx, arrays=arrays, anchors='same')
    blobs.from_bytes(blobs.check_trainer_states(payload['trainer'], path), trainer.load_states,
                     path)
    if args is not None:
        optimizer = trainer._optimizer
        optimizer.lr_scheduler = get_lr_scheduler(args, num_batches)
        optimizer.wd, optimizer.momentum = args.wd, args.momentum
    sampler = _sampler(train_data)
    if sampler is not None and hasattr(sampler, '_prev'):
        sampler._prev = list(payload['extra'].get('sampler_prev', []))
    ckpt_io.set_rng_states(payload['rng'])
    if reports is not None:
        reports.append(report.format())
    return payload, TrainState(iteration=payload['iteration'], resume_changes=changes)


def export_model(net, args, ctx):
    """``net.export`` at ``data_shape`` as seed 000 ends its training: ``model-symbol.json`` and
    ``model-0000.params`` in ``--model-dir`` (default: ``--save-prefix``'s folder), atomically.
    """
    model_dir = args.model_dir or os.path.dirname(args.save_prefix) or '.'
    os.makedirs(model_dir, exist_ok=True)
    net.hybridize()
    net(mx.nd.zeros((1, 3, args.data_shape, args.data_shape), ctx=ctx[0]))
    tmp_prefix = os.path.join(model_dir, '.model-export-tmp')
    blobs.export_streamed(net, tmp_prefix)
    final = os.path.join(model_dir, 'model')
    for suffix in ('-symbol.json', '-0000.params'):
        os.replace(tmp_prefix + suffix, final + suffix)
    return final


def train(net, train_data, val_data, eval_metric, ctx, args, comm=None, reports=()):
    """Training pipeline of GluonCV's ``train_yolo3.py``, on gluontrain's loop and hooks (its
    files: docs/recipes.md, "The recipes").

    Parameters
    ----------
    net : gluon.HybridBlock
        The YOLOv3 network (parameters initialised).
    train_data, val_data : DataLoader
        From :func:`.data.get_dataloader` (the sharded ones under ``--horovod``).
    eval_metric : VOC07MApMetric or COCODetectionMetric
    ctx : list of mx.Context
    args : argparse.Namespace
        After ``get_dataset`` set ``num_samples`` and ``main`` appended the network name to
        ``save_prefix``.
    comm : gluontrain.mx.distributed.HorovodComm, optional
        ``--horovod`` (docs/distributed.md, "YOLOv3 with Horovod").
    reports : sequence of str, optional
        The weights reports from ``main``, logged after the arguments.

    Returns
    -------
    TrainState
        ``scores['val']`` holds the last validation ``(names, values)``.
    """
    net.collect_params().reset_ctx(ctx)
    if args.no_wd:
        for _, v in net.collect_params('.*beta|.*gamma|.*bias').items():
            v.wd_mult = 0.0
    if args.label_smooth:
        net._target_generator._label_smooth = True
    world = comm.world_size if comm is not None else 1
    batch_size = args.batch_size // world
    num_batches = batches_per_epoch(train_data, args, batch_size)
    trainer = _trainer(net, args, comm, num_batches)
    header = [str(args)] + list(reports)
    restored = _restore(args, net, trainer, train_data, ctx, num_batches, header)
    paths = RunPaths(args.save_prefix)
    hooks = gluoncv_hooks(
        args, paths, LossMeter(LOSS_NAMES), header, _len_or_none(train_data),
        recipe_hooks(net, train_data, args, comm),
        lambda: validate(net, val_data, ctx, eval_metric, comm),
        lambda *a: save_params(net, *a),
        lambda st, hooks_state: save_checkpoint(
            paths.last_checkpoint, net, trainer, train_data, st, args, hooks_state),
        _samples_hook(net, val_data, ctx, args, paths), comm=comm)
    state = None
    if restored is None and args.start_epoch > 0:
        # weights-only start (reference --resume x.params, loaded by main): move the LR
        # schedule to the epoch instead of re-running the warm-up from update 0
        skipped = args.start_epoch * num_batches
        trainer._optimizer.begin_num_update = trainer._optimizer.num_update = skipped
        state = TrainState(iteration=skipped)
    step = YOLOv3Step(net, trainer, ctx, batch_size, comm=comm)
    state = fit(step, train_data, hooks, args.start_epoch, args.epochs, state, comm=comm,
                restored=restored)
    if getattr(args, 'export', True) and state.is_main:
        path = export_model(net, args, ctx)
        get_logger().info('exported model to {}-symbol.json / -0000.params'.format(path))
    return state


def _trainer(net, args, comm, num_batches):
    """GluonCV's SGD trainer (Horovod's ``DistributedTrainer`` after broadcasting rank 0's
    parameters under ``--horovod``) with the LR schedule of :func:`get_lr_scheduler`."""
    optimizer_params = {'wd': args.wd, 'momentum': args.momentum,
                        'lr_scheduler': get_lr_scheduler(args, num_batches)}
    if comm is not None and hasattr(comm, 'hvd'):
        comm.hvd.broadcast_parameters(net.collect_params(), root_rank=0)
        return comm.hvd.DistributedTrainer(net.collect_params(), 'sgd', optimizer_params)
    return gluon.Trainer(net.collect_params(), 'sgd', optimizer_params, kvstore='local',
                         update_on_kvstore=(False if args.amp else None))


def _restore(args, net, trainer, train_data, ctx, num_batches, header):
    """``--resume``'s checkpoint restored (its report appended to ``header``, hence before the
    hooks are built), or None for no resume or a weights file (``main`` loaded it)."""
    resume = (getattr(args, 'resume', '') or '').strip()
    if not resume:
        return None
    kind, restored = ckpt_io.resume_or_load(
        resume, lambda p: restore_checkpoint(p, net, trainer, train_data, ctx, args,
                                             num_batches, reports=header),
        lambda p: None, ckpt_io.MX_PARAMS)
    return Restored(resume, *restored) if kind == ckpt_io.CHECKPOINT else None


def _samples_hook(net, val_data, ctx, args, paths):
    """``{prefix}_val_samples.png`` from the raw images behind the validation loader."""
    if not getattr(args, 'plots', True):
        return None
    dataset = raw_val_dataset(val_data)
    if dataset is None:
        warnings.warn('no raw validation images behind the validation loader; '
                      '{} will not be drawn'.format(paths.val_samples))
        return None
    classes = getattr(dataset, 'classes', None)
    return val_samples_hook(net, dataset, list(classes) if classes else None,
                            paths.val_samples, ctx, args.data_shape)


def _len_or_none(loader):
    try:
        return len(loader)
    except TypeError:
        return None


def load_weights(path, net, async_net, ctx, argument='--load-weights'):
    """Load a weights file (or a checkpoint's weights) into both networks, strictly as the
    reference's ``net.load_parameters``; ``ctx`` is unused (:func:`train` moves them).

    Returns
    -------
    LoadReport
        "loaded N of M tensors from FILE", for the training log.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        (``WeightsLoadError``) One line naming the file and ``argument``: not MXNet weights,
        another network's, tensors missing / unexpected / misshapen, or other ``--anchors``.
    """
    del ctx  # kept for the callers; see below
    arrays = read_params(path, argument, WEIGHTS_FIX)
    # on the contexts get_net initialised them on, as the reference loads (train moves them
    # to the training contexts): a GPU list here would fail Gluon's "initialized on" check
    # the file's anchors must be the network's (--anchors): the targets are matched to them
    report = load_params(net, path, argument, WEIGHTS_FIX, arrays=arrays, anchors='same')
    if async_net is not net:
        load_params(async_net, path, argument, WEIGHTS_FIX, arrays=arrays, anchors='same')
    return report


def main(argv=None):
    """Parse ``argv``, build everything and train, in the reference ``__main__``'s order;
    returns :func:`train`'s state."""
    args = parse_args(argv)
    if args.backend != 'mxnet':
        raise ValueError('--backend {} is the PyTorch recipe: run it through scripts/'
                         'train_yolov3.py or gluontrain.torch.yolo3.main'.format(args.backend))
    comm = None
    if args.horovod:
        if args.cpus:
            raise ValueError('--horovod trains one context per process; drop --cpus (start '
                             'more processes with horovodrun -np instead)')
        hvd = import_horovod()
        hvd.init()
        comm = HorovodComm(hvd)
        quiet_other_ranks(comm)
        ctx = horovod_contexts(hvd, args.gpus)
    else:
        ctx = get_contexts(args.gpus, args.cpus)
    check_args(args, ctx, comm)
    # a missing or folder --resume / --load-weights fails before the data is read
    check_weight_files(args, WEIGHTS_FIX)
    # fix seed for mxnet, numpy and python builtin random generator.
    gutils.random.seed(args.seed)
    args.save_prefix += '_'.join(('yolo3', args.network, args.dataset))
    # custom classes come from the data, so the dataset is read before the net is built;
    # neither step draws random numbers, so the order changes no result
    train_dataset, val_dataset, eval_metric = get_dataset(args.dataset, args)
    reports = []
    net, async_net = get_net(args, ctx, reports)
    # --resume is decided by content (train() resumes a checkpoint): anything else is read as
    # weights here, into both networks, before the loaders build their target generators
    weights, argument = weights_to_load(args, _resume_kind)
    if weights:
        reports.append(load_weights(weights, net, async_net, ctx, argument).format())
    # the reference's per-rank batch under Horovod; the loaders then shard the data
    batch_size = args.batch_size // comm.world_size if comm is not None else args.batch_size
    train_data, val_data = get_dataloader(async_net, train_dataset, val_dataset, args.data_shape,
                                          batch_size, args.num_workers, args, comm)
    return train(net, train_data, val_data, eval_metric, ctx, args, comm, reports=reports)


def _resume_kind(path):
    """:func:`gluontrain.core.checkpoint.file_kind`, or ``None`` for a file it cannot name
    (:func:`load_weights` then describes it)."""
    try:
        return ckpt_io.file_kind(path)
    except ValueError:
        return None
