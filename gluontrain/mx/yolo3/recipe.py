"""GluonCV's YOLOv3 recipe on MXNet: the contract (``parse_args, get_dataset, get_dataloader,
get_net, train, validate, save_params, main``) with the reference's signatures.

``train`` assembles the backend step (:class:`.step.YOLOv3Step`), the backend-neutral loop
(:func:`gluontrain.core.loop.run_loop`) and hooks (:mod:`.hooks`); ``main`` is the reference
script's ``__main__``. See docs/faithfulness.md for where it deliberately differs from
GluonCV's ``train_yolo3.py``.
"""
import os
import warnings

import mxnet as mx
from mxnet import gluon

from gluoncv import utils as gutils
from gluoncv.utils import LRScheduler, LRSequential

from ...core import checkpoint as ckpt_io
from ...core.defaults import RunPaths
from ...core.hooks import get_logger, restore_hooks_state
from ...core.loop import TrainState, fit
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
    """Save ``{prefix}_best.params`` when the score improves, and every ``save_interval`` epochs.

    As the reference: ``best_map`` is a one-element list updated in place and starts at 0, so a
    score of 0.0 never saves a best; the best score is appended to ``{prefix}_best_map.log`` as
    ``'{epoch:04d}:\\t{map:.4f}'``; interval files are ``{prefix}_{epoch:04d}_{map:.4f}.params``
    (epoch 0 included). Files are written atomically.
    """
    save_best_and_interval(
        lambda path: ckpt_io.atomic_save_file(path, net.save_parameters),
        best_map, current_map, epoch, save_interval, prefix, '.params')


def validate(net, val_data, ctx, eval_metric, comm=None):
    """Run ``net`` over ``val_data`` and return ``eval_metric.get()``: ``(names, values)``.

    NMS is set to 0.45 / top-400, predicted boxes are clipped to the input size, ground-truth
    ids are label column 4 and difficult flags column 5 when present, as in the reference.

    With ``comm`` of several ranks, each rank runs its own part of the split (its
    ``val_data`` reads a :func:`~gluontrain.core.sharding.contiguous_shard`); the per-image
    results are gathered and fed to ``eval_metric`` in rank order, i.e. in the split's own
    order by rank 0, whose score every rank returns (the reference validates on rank 0 alone,
    over the whole split).
    """
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
    """Linear warm-up then ``--lr-mode``, over ``num_batches`` updates per epoch.

    ``num_batches`` defaults to ``num_samples // batch_size``; under Horovod it is the number
    of per-rank batches of a rank's shard (:func:`batches_per_epoch`), which is the same
    number when the world size divides the batch and the data.
    Seed 000 passes ``iters_per_epoch=args.batch_size``, which stretches or squeezes every decay
    by ``batch_size**2 / num_samples``; GluonCV's released script uses the number of batches.
    """
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
    """Write the full checkpoint of a finished epoch atomically (see docs/recipes.md):
    weights, trainer, position, best score, the hooks' state and the sampler's leftovers."""
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
    """Load a full checkpoint into ``net``/``trainer`` (and the sampler's leftovers, the RNG);
    returns ``(payload, state)``; the hooks take their part with
    :func:`gluontrain.core.hooks.restore_hooks_state`. The weights load with a report
    (:func:`.weights.load_params`), whose lines are appended to ``reports`` when given.

    With ``args`` (this run's arguments), the arguments in :data:`RESUME_MUST_MATCH` must
    equal the checkpoint's (else ``ValueError``), and what the user may change is honoured:
    ``trainer.load_states`` brings back MXNet's whole optimizer, so its LR schedule is rebuilt
    from ``args`` (it reads the restored update count, ``num_batches`` per epoch, see
    :func:`get_lr_scheduler`) and ``wd``/``momentum`` are set from ``args``;
    ``state.resume_changes`` lists every argument that differs.
    """
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
    """``net.export`` of the inference graph at ``data_shape``, as seed 000 ends its training.

    Writes ``{model_dir}/model-symbol.json`` and ``model-0000.params`` (model_dir defaults to
    the folder of ``--save-prefix``) through temporary names, then renames them.
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
    """Training pipeline of GluonCV's ``train_yolo3.py``, on gluontrain's loop and hooks.

    Parameters
    ----------
    net : gluon.HybridBlock
        The YOLOv3 network (parameters initialised); see :func:`.model.get_net`.
    train_data, val_data : DataLoader
        From :func:`.data.get_dataloader`.
    eval_metric : VOC07MApMetric or COCODetectionMetric
    ctx : list of mx.Context
    args : argparse.Namespace
        From :func:`.args.parse_args`, after ``get_dataset`` set ``num_samples`` and the caller
        appended the network name to ``save_prefix`` (as the reference's ``__main__`` does).
    comm : gluontrain.mx.distributed.HorovodComm, optional
        ``--horovod``: parameters are broadcast from rank 0, ``hvd.DistributedTrainer``
        averages the gradients, ``trainer.step`` normalises by the per-rank batch
        (``batch_size // size``, the reference's), the loaders must be the sharded ones of
        :func:`.data.get_dataloader`, losses are averaged over the ranks for the logs, and
        rank 0 alone logs, saves, draws and exports.
    reports : sequence of str, optional
        What loaded the weights (:mod:`.weights` reports from ``main``), logged after the
        arguments; a resumed checkpoint's report follows them.

    Returns
    -------
    TrainState
        Final loop state: ``scores['val']`` holds the last validation ``(names, values)``.

    Writes ``{prefix}_train.log``, ``{prefix}_metrics.jsonl``, ``{prefix}_best.params``,
    ``{prefix}_best_map.log``, ``{prefix}_{epoch:04d}_{map:.4f}.params``, the full checkpoint
    ``{prefix}_last.ckpt`` after every epoch, and the exported model at the end.
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
    optimizer_params = {'wd': args.wd, 'momentum': args.momentum,
                        'lr_scheduler': get_lr_scheduler(args, num_batches)}
    if comm is not None and hasattr(comm, 'hvd'):
        comm.hvd.broadcast_parameters(net.collect_params(), root_rank=0)
        trainer = comm.hvd.DistributedTrainer(net.collect_params(), 'sgd', optimizer_params)
    else:
        trainer = gluon.Trainer(net.collect_params(), 'sgd', optimizer_params, kvstore='local',
                                update_on_kvstore=(False if args.amp else None))
    start_epoch, state = args.start_epoch, None
    resume = (getattr(args, 'resume', '') or '').strip()
    kind, header = None, [str(args)] + list(reports)
    if resume:
        # MXNet weights were loaded by main (into net and async_net); a torch file is refused.
        # Restored before the hooks are built, so that the log's header has the report
        kind, restored = ckpt_io.resume_or_load(
            resume, lambda p: restore_checkpoint(p, net, trainer, train_data, ctx, args,
                                                 num_batches, reports=header),
            lambda p: None, ckpt_io.MX_PARAMS)
    paths = RunPaths(args.save_prefix)
    hooks = gluoncv_hooks(
        args, paths, LossMeter(LOSS_NAMES), header, _len_or_none(train_data),
        recipe_hooks(net, train_data, args, comm),
        lambda: validate(net, val_data, ctx, eval_metric, comm),
        lambda *a: save_params(net, *a),
        lambda st, hooks_state: save_checkpoint(
            paths.last_checkpoint, net, trainer, train_data, st, args, hooks_state),
        _samples_hook(net, val_data, ctx, args, paths), comm=comm)
    if kind == ckpt_io.CHECKPOINT:
        payload, state = restored
        restore_hooks_state(hooks, payload)
        start_epoch = payload['epoch'] + 1
        # until this run writes its own, the resumed checkpoint is the last good one
        state.resumed_from = state.last_checkpoint = resume
    elif start_epoch > 0:
        # weights-only start (reference --resume x.params, loaded by main): move the LR
        # schedule to the epoch instead of re-running the warm-up from update 0
        skipped = start_epoch * num_batches
        trainer._optimizer.begin_num_update = trainer._optimizer.num_update = skipped
        state = TrainState(iteration=skipped)
    step = YOLOv3Step(net, trainer, ctx, batch_size, comm=comm)
    state = fit(step, train_data, hooks, start_epoch, args.epochs, state, comm=comm)
    if getattr(args, 'export', True) and state.is_main:
        path = export_model(net, args, ctx)
        get_logger().info('exported model to {}-symbol.json / -0000.params'.format(path))
    return state


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
    """Load a weights file into both networks (``--load-weights`` / ``--resume x.params``).

    Strict, as the reference's ``net.load_parameters``: every parameter must be in the file
    with its shape and the file may hold nothing else. A gluontrain checkpoint's weights load
    too. The parameters stay on the contexts ``get_net`` initialised them on (``ctx`` is not
    used: :func:`train` moves them), as the reference's ``load_parameters(file)``.

    Returns
    -------
    LoadReport
        "loaded N of M tensors from FILE", for the training log.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        (:class:`~gluontrain.core.load_report.WeightsLoadError`) One line naming the file and
        ``argument``: not an MXNet ``.params`` file (a PyTorch file, a truncated one), the
        weights of another network (another ``--network`` or other classes: what the file
        looks like and the arguments it fits), tensors missing / unexpected / of another
        shape, or anchors that are not the network's (``--anchors``; the line names both).
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
    """Parse ``argv``, build everything and train, in the reference ``__main__``'s order.

    Returns
    -------
    TrainState
        As :func:`train` returns it.
    """
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
    (which :func:`load_weights` then describes, as it does a PyTorch file); a missing or
    folder ``--resume`` was refused before (``check_weight_files``)."""
    try:
        return ckpt_io.file_kind(path)
    except ValueError:
        return None
