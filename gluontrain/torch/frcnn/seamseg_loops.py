"""seamseg's own ``train`` and ``validate`` loops (scripts/train_detection.py), with the
seed's signature ``train(model, optimizer, scheduler, dataloader, meters, **varargs)``, for
users who drive the recipe as seamseg does. :func:`train` is one epoch of the recipe's
training (gluontrain's loop with :mod:`.step` and :mod:`.hooks`); the recipe's ``validate``
is :func:`validate`.

The model contract is seamseg's ``DetectionNet``: ``model(img=, cat=, iscrowd=, bbx=,
do_loss=, do_prediction=)`` returns ``(losses, predictions)``, ``losses`` an ordered dict
``obj_loss, bbx_loss, roi_cls_loss, roi_bbx_loss`` and ``predictions`` per-image lists
``bbx_pred`` / ``cls_pred`` / ``obj_pred`` (``None`` for an image without detections).
These loops are tested with a stand-in model. What differs from seamseg (any device, no
barrier after the forward, the logged ``lr``): docs/faithfulness.md, "Two-stage detector",
"Deliberate differences"."""
import time
from collections import OrderedDict

import torch

from ...core.loop import TrainState, run_loop
from ..distributed import is_distributed, is_main_process
from . import log as logging
from .coco_eval import category_map, process_prediction, summarize_distributed
from .hooks import SeamsegLogHook, SeamsegScheduleHook
from .meters import AverageMeter
from .model import LOSS_NAMES
from .step import make_step, upload

__all__ = ['train', 'validate', 'all_reduce_losses', 'LOSS_NAMES']


def all_reduce_losses(losses):
    """Mean of each 0-d loss over the processes (seamseg's ``all_reduce_losses``); unchanged
    in a single process.

    Parameters
    ----------
    losses : OrderedDict of torch.Tensor

    Returns
    -------
    OrderedDict of torch.Tensor
    """
    if not is_distributed():
        return OrderedDict((k, v.detach()) for k, v in losses.items())
    values = torch.cat([v.detach().reshape(1) for v in losses.values()])
    torch.distributed.all_reduce(values)
    values /= torch.distributed.get_world_size()
    return OrderedDict((k, v.reshape(())) for k, v in zip(losses, values))


def train(model, optimizer, scheduler, dataloader, meters, **varargs):
    """One training epoch, as seamseg's ``train``: one epoch of gluontrain's loop with the
    recipe's step and hooks (:func:`.step.make_step`, :class:`.hooks.SeamsegScheduleHook`,
    :class:`.hooks.SeamsegLogHook`).

    Parameters
    ----------
    model, optimizer, scheduler, dataloader
        The batch sampler must have ``set_epoch``.
    meters : dict of AverageMeter
        ``loss`` and the four :data:`LOSS_NAMES`.
    **varargs
        ``epoch`` (0-based), ``num_epochs``, ``global_step``, ``batch_update``,
        ``loss_weights``, ``log_interval``, optional ``summary`` (TensorBoard writer) and
        ``device`` (default CPU). With ``batch_update`` false the rate of ``epoch`` is set
        at the start (``scheduler.step(epoch)``, which seamseg's ``main`` calls before
        ``train``: a second call changes nothing).

    Returns
    -------
    int
        The global step after the epoch.
    """
    epoch, weights = varargs['epoch'], varargs['loss_weights']
    hooks = [SeamsegScheduleHook(model, scheduler, dataloader.batch_sampler,
                                 varargs['batch_update']),
             SeamsegLogHook(optimizer, weights, len(dataloader), varargs['num_epochs'],
                            varargs['log_interval'], varargs.get('summary'), is_main_process(),
                            meters)]
    step = make_step(model, optimizer, varargs.get('device', torch.device('cpu')), weights)
    state = run_loop(step, dataloader, hooks, epoch, epoch + 1,
                     TrainState(iteration=varargs['global_step']))
    return state.iteration


def validate(model, dataloader, loss_weights, **varargs):
    """Validation loss and COCO box AP, as seamseg's ``validate``.

    Parameters
    ----------
    model, dataloader
    loss_weights : sequence of float
    **varargs
        ``epoch``, ``num_epochs``, ``global_step``, ``log_interval``, ``coco_gt`` (ground
        truth json), optional ``summary``, ``device``, ``categories`` (default
        :func:`.coco_eval.category_map` of the dataset) and ``reference_img_filter``
        (seamseg's evaluation on images with detections only).

    Returns
    -------
    float
        ``det_map``, AP@[.50:.95].
    """
    model.eval()
    dataloader.batch_sampler.set_epoch(varargs['epoch'])
    device = varargs.get('device', torch.device('cpu'))
    summary = varargs.get('summary')
    categories = varargs.get('categories') or category_map(dataloader.dataset)
    loss_meter, data_time_meter, batch_time_meter = (AverageMeter(()) for _ in range(3))
    coco_struct, img_list = [], []

    data_time = time.time()
    for it, batch in enumerate(dataloader):
        with torch.no_grad():
            idxs, original_sizes = batch['idx'], batch['size']
            batch_sizes = [tuple(img.shape[-2:]) for img in batch['img']]
            batch = upload(batch, device)
            data_time_meter.update(time.time() - data_time)

            batch_time = time.time()
            losses, pred = model(**batch, do_loss=True, do_prediction=True)
            losses = all_reduce_losses(OrderedDict((k, v.mean()) for k, v in losses.items()))
            loss = sum(w * l for w, l in zip(loss_weights, losses.values()))
            loss_meter.update(loss.cpu())
            batch_time_meter.update(time.time() - batch_time)

            for i, (bbx_pred, cls_pred, obj_pred) in enumerate(
                    zip(pred['bbx_pred'], pred['cls_pred'], pred['obj_pred'])):
                img_list.append(idxs[i])
                if bbx_pred is None:
                    continue
                coco_struct += process_prediction(bbx_pred, cls_pred, obj_pred, batch_sizes[i],
                                                  idxs[i], original_sizes[i], categories)
            del pred, batch

            if is_main_process() and (it + 1) % varargs['log_interval'] == 0:
                logging.iteration(None, 'val', varargs['global_step'], varargs['epoch'] + 1,
                                  varargs['num_epochs'], it + 1, len(dataloader),
                                  OrderedDict([('loss', loss_meter),
                                               ('data_time', data_time_meter),
                                               ('batch_time', batch_time_meter)]))
            data_time = time.time()

    det_map = summarize_distributed(coco_struct, varargs['coco_gt'], img_list,
                                    varargs.get('reference_img_filter', False))
    if is_main_process():
        logging.get_logger().info('Validation done')
        logging.iteration(summary, 'val', varargs['global_step'], varargs['epoch'] + 1,
                          varargs['num_epochs'], len(dataloader), len(dataloader),
                          OrderedDict([('loss', loss_meter.mean.item()), ('det_map', det_map),
                                       ('data_time', data_time_meter.mean.item()),
                                       ('batch_time', batch_time_meter.mean.item())]))
    return det_map
