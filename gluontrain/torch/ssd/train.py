"""``train``, ``validate`` and ``save_params`` of the SSD300 recipe (ssd.pytorch's train.py and
eval.py), on gluontrain's loop and hooks.

ssd.pytorch trains by iterations: ``max_iter`` steps over a batch iterator, the LR divided by
10 (``gamma``) when the iteration index reaches each of ``lr_steps``, weights saved every 5000
iterations. Here the loop runs passes over the DataLoader (re-created each pass: the
reference never re-creates its iterator and dies with StopIteration after one epoch) and
the hooks below stop at ``max_iter`` and do the iteration-based work.
"""
import math
import os

import torch

from ...core import checkpoint as ckpt_io
from ...core.hooks import (CheckpointHook, LogHook, LossMeterHook, MetricsJSONHook,
                           NaNGuardHook, ProgressHook, TensorBoardHook, format_validation,
                           get_logger)
from ...core.loop import Hook, TrainState, run_loop
from ...core.meters import LossMeter
from ...core.plots import CurvesHook
from ..checkpoint import load_weights, restore_checkpoint, save_checkpoint, save_weights
from .detection import detections_in_pixels
from .model import test_phase

LOSS_NAMES = ('loc_loss', 'conf_loss')


class SSDStep:
    """One SSD step: forward, MultiBoxLoss, backward, SGD update (ssd.pytorch's loop body).

    Returns ``{'losses': {'loc_loss': [(l, 1)], 'conf_loss': [(c, 1)]}, 'lr', 'batch_size'}``:
    one value per step, so the meters average per-iteration losses as ssd.pytorch's
    ``loc_loss += loss_l`` counters do.
    """

    def __init__(self, net, criterion, optimizer, device):
        self.net, self.criterion, self.optimizer, self.device = net, criterion, optimizer, device

    def __call__(self, batch, state=None):
        images, targets = batch
        images = images.to(self.device)
        targets = targets.to(self.device) if torch.is_tensor(targets) \
            else [t.to(self.device) for t in targets]
        out = self.net(images)
        self.optimizer.zero_grad()
        loss_l, loss_c = self.criterion(out, targets)
        (loss_l + loss_c).backward()
        self.optimizer.step()
        return {'losses': {'loc_loss': [(loss_l.item(), 1)], 'conf_loss': [(loss_c.item(), 1)]},
                'lr': self.optimizer.param_groups[0]['lr'], 'batch_size': int(images.shape[0])}


def lr_at(iteration, base_lr, gamma, lr_steps):
    """ssd.pytorch's rate for the step with 0-based index ``iteration``.

    The reference increments ``step_index`` when ``iteration in lr_steps`` *before* that
    step, so the rate is ``base_lr * gamma ** #{s in lr_steps: s <= iteration}``. Computing it
    from the iteration (instead of counting crossings) keeps it right after a resume, where
    the reference restarts ``step_index`` at 0.
    """
    return base_lr * gamma ** sum(1 for s in lr_steps if s <= iteration)


class SSDIterationHook(Hook):
    """Iteration-based work of ssd.pytorch's loop: LR steps, ``max_iter``, periodic saves,
    the reference's ``iter N || Loss: x ||`` line, optional periodic validation."""

    def __init__(self, optimizer, args, max_iter, lr_steps, save_fn, validate_fn=None):
        self.optimizer, self.args = optimizer, args
        self.max_iter, self.lr_steps = max_iter, list(lr_steps)
        self.save_fn, self.validate_fn = save_fn, validate_fn
        self.logger = get_logger()

    def before_train(self, state):
        if state.iteration >= self.max_iter:
            state.stop('max_iter {} already reached'.format(self.max_iter))

    def before_batch(self, state):
        lr = lr_at(state.iteration, self.args.lr, self.args.gamma, self.lr_steps)
        for group in self.optimizer.param_groups:
            group['lr'] = lr

    def after_batch(self, state):
        i = state.iteration - 1  # the reference's 0-based loop index of the finished step
        if self.args.log_interval and i % self.args.log_interval == 0:
            loss = sum(t for parts in state.outputs['losses'].values() for t, _ in parts)
            self.logger.info('iter {} || Loss: {:.4f} ||'.format(i, loss))
        if self.args.save_interval and i != 0 and i % self.args.save_interval == 0:
            self.save_fn(state, i)
        done = state.iteration >= self.max_iter
        if self.validate_fn and (done or (self.args.val_interval and
                                          state.iteration % self.args.val_interval == 0)):
            self.validate_fn(state)
        if done:
            state.stop('max_iter {} reached'.format(self.max_iter))


def save_params(net, best_map, current_map, epoch, save_interval, prefix):
    """GluonCV-style weights files for the common interface: ``{prefix}_best.pth`` when the
    score beats ``best_map[0]`` (appending to ``{prefix}_best_map.log``) and
    ``{prefix}_{epoch:04d}_{map:.4f}.pth`` every ``save_interval`` (here: iterations)."""
    ckpt_io.save_best_and_interval(lambda path: save_weights(path, net), best_map, current_map,
                                   epoch, save_interval, prefix, '.pth')


def validate(net, val_data, ctx, eval_metric):
    """VOC07 11-point mAP as ssd.pytorch's eval.py computes it.

    The net runs in test phase (softmax + Detect: conf 0.01, NMS 0.45, top 200); every
    detection with a positive score is scaled to its image's pixel size and shifted by +1
    (eval.py writes VOC's 1-based coordinates), and matched against the annotation's boxes.

    Parameters
    ----------
    val_data : iterable
        Batches ``(images, gts, sizes)`` from :class:`.recipe.VOCEvalDataset` via the loader:
        ``gts`` padded ``[B, M, 6]`` (x1, y1, x2, y2 as in the XML, label, difficult; -1 rows
        are padding), ``sizes`` ``[B, 2]`` (height, width).
    ctx : list of torch.device
    eval_metric : gluontrain.core.voc_eval.VOCEvaluator

    Returns
    -------
    (names, values)
        Class names + ['mAP'] and their APs.
    """
    eval_metric.reset()
    with test_phase(net) as model:
        for images, gts, sizes in val_data:
            dets = model(images.to(ctx[0])).cpu().numpy()
            for b in range(dets.shape[0]):
                h, w = (float(v) for v in sizes[b])
                labels, scores, boxes = detections_in_pixels(dets[b], w, h)
                gt = gts[b].numpy()
                gt = gt[gt[:, 4] >= 0]
                # +1: eval.py writes VOC's 1-based pixel coordinates
                eval_metric.update(boxes + 1, scores, labels, gt[:, :4], gt[:, 4], gt[:, 5])
    return eval_metric.get()


def train(net, train_data, val_data, eval_metric, ctx, args):
    """ssd.pytorch's training loop on gluontrain's loop and hooks.

    Parameters
    ----------
    net : SSD
        From :func:`.model.build_ssd` in 'train' phase (weights initialised or loaded).
    train_data : DataLoader
        Batches ``(images [B,3,300,300], targets [B,M,5] padded with -1)``.
    val_data : DataLoader or None
        See :func:`validate`; ``None`` skips validation (COCO: ssd.pytorch has no COCO eval).
    eval_metric : VOCEvaluator or None
    ctx : list of torch.device
        Training runs on ``ctx[0]`` (several GPUs: launch with torchrun).
    args : argparse.Namespace
        From :func:`.args.parse_args`; ``args.cfg`` holds the config dict.

    Returns
    -------
    TrainState
    """
    from .multibox_loss import MultiBoxLoss  # pylint: disable=import-outside-toplevel
    from .plots import val_samples_hook  # pylint: disable=import-outside-toplevel
    cfg = args.cfg
    device = ctx[0]
    net.to(device)
    net.train()
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    criterion = MultiBoxLoss(cfg['num_classes'], 0.5, True, 0, True, 3, 0.5, False,
                             device.type == 'cuda')
    os.makedirs(args.save_folder, exist_ok=True)
    prefix = os.path.join(args.save_folder, 'ssd300_{}'.format(args.dataset))
    meter, best_map = LossMeter(LOSS_NAMES), [0]
    state = TrainState(iteration=args.start_iter)
    resume = args.resume or ''
    if resume.endswith('.ckpt'):
        payload, state = restore_checkpoint(resume, net, optimizer)
        meter.load_state_dict(payload['extra']['meter'])
        best_map[0] = payload['best_score']
    elif resume:
        load_weights(resume, net)

    def save_periodic(st, index):
        # the reference's periodic file (it names every dataset 'COCO'; here its own name)
        save_weights('{}_{}.pth'.format(prefix, index), net)

    def save_full(st):
        # at the end of a pass over the data: the next pass draws a new shuffle from the
        # restored RNG, so a resume from here replays the uninterrupted run exactly
        return save_checkpoint(prefix + '_last.ckpt', net, optimizer, None, st.epoch,
                               st.iteration, best_map[0], args,
                               extra={'meter': meter.state_dict()})

    def run_validation(st):
        names, values = validate(net, val_data, ctx, eval_metric)
        get_logger().info('[Iter {}] Validation: \n{}'.format(
            st.iteration, format_validation(names, values)))
        st.scores['val'] = (names, values)
        save_params(net, best_map, values[-1], st.iteration, 0, prefix)

    max_iter = args.max_iter or cfg['max_iter']
    lr_steps = [int(s) for s in args.lr_steps.split(',')] if args.lr_steps else cfg['lr_steps']
    hooks = [NaNGuardHook(), LossMeterHook(meter),
             SSDIterationHook(optimizer, args, max_iter, lr_steps, save_periodic,
                              run_validation if val_data is not None else None),
             CheckpointHook(save_full),
             LogHook(meter, log_file=prefix + '_train.log', log_interval=0,
                     batch_size=args.batch_size, header=[str(args)]),
             MetricsJSONHook(prefix + '_metrics.jsonl', meter),
             CurvesHook(prefix + '_curves.png', meter, history=prefix + '_metrics.jsonl',
                        title='ssd300 {} (x = passes over the data)'.format(args.dataset)),
             val_samples_hook(net, getattr(val_data, 'dataset', None),
                              prefix + '_val_samples.png', device),
             ProgressHook(num_batches=len(train_data), batch_size=args.batch_size, meter=meter)]
    if args.tensorboard:
        hooks.append(TensorBoardHook(args.tensorboard, meter, args.log_interval))
    passes = math.ceil(max(max_iter - state.iteration, 0) / max(len(train_data), 1))
    start = state.iteration // max(len(train_data), 1)
    state = run_loop(SSDStep(net, criterion, optimizer, device), train_data, hooks, start,
                     start + passes, state)
    if state.scores.get('nonfinite'):
        raise FloatingPointError(state.stop_reason)
    # the reference's final file: save_folder + dataset + '.pth'
    save_weights(os.path.join(args.save_folder, args.dataset + '.pth'), net)
    state.scores['last_checkpoint'] = save_full(state)
    state.scores['best'] = best_map[0]
    return state
