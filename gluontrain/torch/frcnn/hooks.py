"""seamseg's ``main`` training loop as hooks of gluontrain's loop.

One epoch of :func:`gluontrain.core.loop.run_loop` is one of seamseg's ``train`` epochs:
the batch sampler is set to the epoch, the poly/burn-in rate is set from ``global_step``
before every forward (:class:`SeamsegScheduleHook`), the model's losses are weighted by
``loss_weights`` (:mod:`.step`), seamseg's momentum meters and log line go to
``{log_dir}/training.log`` (:class:`SeamsegLogHook`), validation (COCO AP, ``det_map``) runs
every ``val_interval`` epochs, and seamseg's snapshots ``model_last.pth.tar`` /
``model_best.pth.tar`` are written after every epoch (:class:`SeamsegCheckpointHook`). The
common hooks add ``frcnn_train.log``, ``frcnn_metrics.jsonl``, ``frcnn_curves.png``,
``frcnn_val_samples.png``, the NaN guard, the progress bar, TensorBoard (when
``tensorboardX`` is installed) and the full checkpoint ``frcnn_last.ckpt`` (RNG included)
from which ``--resume`` continues exactly.
"""
import os
import shutil
import time
from collections import OrderedDict

import torch

from ...core.hooks import get_logger as core_logger
from ...core.load_report import WeightsLoadError
from ...core.loop import Hook, TrainState
from ...core.lr_scheduler import ScheduleHook
from ..distributed import unwrap_model
from . import log as logging
from .meters import AverageMeter
from .model import LOSS_NAMES
from .optim import current_lr
from .snapshot import BEST, LAST, METERS, MODULES, resume_from_snapshot, save_snapshot

__all__ = ['SeamsegScheduleHook', 'SeamsegLogHook', 'SeamsegCheckpointHook']


class SeamsegScheduleHook(ScheduleHook):
    """Epoch set-up and the learning rate, as seamseg's ``main``/``train``.

    ``before_epoch``: model in train mode, ``batch_sampler.set_epoch(epoch)``, and in epoch
    mode ``scheduler.step(epoch)``. ``before_batch``: in batch mode
    ``scheduler.step(global_step)`` with ``global_step = state.iteration + 1`` (the rate of
    step k is set before its forward; a resumed run recomputes it from the restored
    iteration). ``state`` is the loop's state (epoch and step for the validation's log
    lines), on every rank.
    """

    def __init__(self, model, scheduler, batch_sampler, batch_update):
        if batch_update:
            super().__init__(scheduler, 'before_batch', lambda state: (state.iteration + 1,))
        else:
            super().__init__(scheduler, 'before_epoch', lambda state: (state.epoch,))
        self.model, self.batch_sampler = model, batch_sampler
        self.state = TrainState()

    def before_epoch(self, state):
        self.state = state
        self.model.train()
        self.batch_sampler.set_epoch(state.epoch)
        super().before_epoch(state)


class SeamsegLogHook(Hook):
    """seamseg's ``AverageMeter(momentum = 1 - 1 / len(loader))`` per loss and its train log
    line every ``log_interval`` batches (``lr``, ``loss``, the four losses, ``data_time``:
    from the end of the previous step to this one's start, ``batch_time``: the step), with
    TensorBoard scalars when a writer is given. Its loss meters (``meters``, default new
    ones) are saved in the checkpoint."""
    main_process_only = True  # seamseg's log lines; rank 0 alone logs

    def __init__(self, optimizer, loss_weights, num_batches, num_epochs, log_interval,
                 summary=None, is_main=True, meters=None):
        momentum = 1. - 1. / max(num_batches, 1)
        self.meters = meters if meters is not None else OrderedDict(
            (k, AverageMeter((), momentum)) for k in METERS)
        self.times = OrderedDict((k, AverageMeter((), momentum))
                                 for k in ('data_time', 'batch_time'))
        self.optimizer, self.loss_weights = optimizer, tuple(loss_weights)
        self.num_batches, self.num_epochs = num_batches, num_epochs
        self.log_interval, self.summary, self.is_main = log_interval, summary, is_main
        self._since = time.time()

    def before_epoch(self, state):
        self._since = time.time()

    def before_batch(self, state):
        now = time.time()
        self.times['data_time'].update(now - self._since)
        self._since = now

    def after_batch(self, state):
        self.times['batch_time'].update(time.time() - self._since)
        losses = {k: parts[0][0] for k, parts in state.outputs['losses'].items()}
        values = [float(losses[k]) for k in LOSS_NAMES]
        self.meters['loss'].update(sum(w * v for w, v in zip(self.loss_weights, values)))
        for k, v in zip(LOSS_NAMES, values):
            self.meters[k].update(v)
        if self.is_main and self.log_interval and (state.batch + 1) % self.log_interval == 0:
            line = OrderedDict([('lr', current_lr(self.optimizer))])
            line.update((k, self.meters[k]) for k in METERS)
            line.update(self.times)
            logging.iteration(self.summary, 'train', state.iteration, state.epoch + 1,
                              self.num_epochs, state.batch + 1, self.num_batches, line)
        self._since = time.time()

    def state_dict(self):
        return {k: {n: t.tolist() for n, t in m.state_dict().items()}
                for k, m in self.meters.items()}

    def load_state_dict(self, state_dict):
        for k, m in self.meters.items():
            m.load_state_dict({n: torch.tensor(v) for n, v in state_dict[k].items()})


class SeamsegCheckpointHook(Hook):
    """seamseg's end of epoch: ``model_last.pth.tar`` (modules, optimizer, meters, config,
    ``training_meta``) and, when this epoch's validation beats the best, its copy
    ``model_best.pth.tar``. Sits after the validation and the best score (``slot``).
    :meth:`resume` reads such a snapshot back (seamseg's ``--resume``)."""
    main_process_only = True  # seamseg's snapshot files are rank 0's
    slot = 'after_best'
    former_names = ('SeamsegSnapshotHook',)  # checkpoints written before issue #23

    def __init__(self, log_dir, model, optimizer, config_text, log_hook, is_main=True):
        self.last, self.best_file = os.path.join(log_dir, LAST), os.path.join(log_dir, BEST)
        self.model, self.optimizer, self.config_text = model, optimizer, config_text
        self.log_hook, self.is_main = log_hook, is_main
        self.last_score, self.best_score = 0., 0.

    def after_epoch(self, state):
        validated = 'val' in state.scores
        # seamseg: last_score is this epoch's det_map, 0 on epochs without validation
        self.last_score = float(state.scores['val'][1][-1]) if validated else 0.
        improved = validated and self.last_score > self.best_score
        if improved:
            # seamseg writes the best *before* this epoch's improvement into both files
            # (a resumed run could then overwrite model_best with a worse model); the
            # file holds the updated best here
            self.best_score = self.last_score
        if not self.is_main:
            return
        net = unwrap_model(self.model)
        dicts = {name: getattr(net, name).state_dict() for name in MODULES}
        dicts['optimizer'] = self.optimizer.state_dict()
        dicts.update(('{}_meter'.format(k), m.state_dict())
                     for k, m in self.log_hook.meters.items())
        save_snapshot(self.last, self.config_text, state.epoch, self.last_score,
                      self.best_score, state.iteration, **dicts)
        if improved:
            shutil.copy(self.last, self.best_file)
            core_logger().debug('new best det_map %.4f: %s', self.best_score, self.best_file)

    def state_dict(self):
        return {'last_score': self.last_score, 'best_score': self.best_score}

    def load_state_dict(self, state_dict):
        self.last_score = state_dict['last_score']
        self.best_score = state_dict['best_score']

    def resume(self, path):
        """seamseg's resume from ``model_last.pth.tar``: modules (reported, complete),
        optimizer, the log hook's meters, scores, epoch and step. A snapshot without the
        training state (one written for pre-training, or by another recipe) is refused in one
        line.

        Returns
        -------
        start_epoch : int
        state : TrainState
            At the snapshot's ``global_step``.
        """
        data = resume_from_snapshot(unwrap_model(self.model), path)
        state_dict, meta = data['state_dict'], data.get('training_meta')
        needed = ['optimizer'] + ['{}_meter'.format(k) for k in self.log_hook.meters]
        lacking = [k for k in needed if k not in state_dict]
        if lacking or not isinstance(meta, dict):
            raise WeightsLoadError(
                '--resume {}: the snapshot holds the weights but not the training state ({} '
                'missing), so training cannot continue where it stopped; start from its '
                'weights with --pre_train {} instead'.format(
                    path, ', '.join(lacking) or '"training_meta"', path))
        try:
            self.optimizer.load_state_dict(state_dict['optimizer'])
        except (ValueError, KeyError) as e:
            raise WeightsLoadError(
                '--resume {}: its optimizer state does not fit this run\'s optimizer ({}); '
                'resume with the [optimizer] and [body] settings it was written with, or start '
                'from its weights with --pre_train {}'.format(
                    path, ' '.join(str(e).split()), path)) from None
        for k, m in self.log_hook.meters.items():
            m.load_state_dict(state_dict['{}_meter'.format(k)])
        self.last_score = meta['last_score']
        self.best_score = meta['best_score']
        state = TrainState(iteration=meta['global_step'])
        state.resumed_from = path  # the log's 'resumed from' line; rows past it are dropped
        return meta['epoch'] + 1, state
