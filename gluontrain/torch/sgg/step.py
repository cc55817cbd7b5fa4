"""The backend step of Scene-Graph-Benchmark's ``tools/relation_train_net.py`` (seed 004) and
``tools/detector_pretrain_net.py``: :class:`SGGStep` (forward, backward, SGB's
``clip_grad_norm`` with its per-parameter log, update), the function
:func:`gluontrain.core.loop.run_loop` calls per batch (:func:`.trainer.do_train` builds it).

The detector tool clips nothing (``clip=False``).
"""
import contextlib
import logging

from ..distributed import all_reduce_mean
from .model import fix_eval_modules
from .solver import clip_grad_norm

__all__ = ['SGGStep']

_LOG = logging.getLogger('gluontrain.sgg')


class SGGStep:
    """One SGB iteration: ``model(images, targets)`` -> loss dict, backward, optional
    ``clip_grad_norm`` at ``SOLVER.GRAD_NORM_CLIP`` (verbose at ``PRINT_GRAD_FREQ`` and the
    first iteration of the process, as SGB), ``optimizer.step()``.

    Parameters
    ----------
    model : torch.nn.Module
    optimizer : torch.optim.Optimizer
    cfg : yacs.config.CfgNode
    device : torch.device
    eval_modules : tuple of torch.nn.Module
        Frozen again after every ``model.train()`` (relation training); () for the detector.
    clip : bool
        Relation training clips; the detector tool does not.
    logger : logging.Logger, optional
    norm_eval : bool, default True
        Passed to :func:`fix_eval_modules` (``model.frozen_norm_eval(cfg)``: False
        when the frozen detector was never trained).
    autocast : callable, optional
        ``autocast() -> context manager`` around the forward (``DTYPE "float16"``: SGB's apex
        AMP O1 as torch's float16 autocast, :func:`gluontrain.torch.step.mixed_precision`).
    scaler : torch.amp.GradScaler, optional
        Dynamic loss scaling (apex O1's); gradients are unscaled before clipping.
    """

    def __init__(self, model, optimizer, cfg, device, eval_modules=(), clip=True, logger=None,
                 norm_eval=True, autocast=None, scaler=None):
        self.autocast, self.scaler = autocast, scaler
        self.model, self.optimizer, self.cfg, self.device = model, optimizer, cfg, device
        self.eval_modules, self.clip, self.norm_eval = tuple(eval_modules), clip, norm_eval
        self.logger = logger or _LOG
        self.print_first_grad = True

    def __call__(self, batch, state):
        images, targets, image_ids = batch
        iteration = state.iteration + 1
        if any(len(t) < 1 for t in targets):
            self.logger.error("Iteration=%d || Image Ids used for training %s || targets "
                              "Length=%s", iteration, list(image_ids), [len(t) for t in targets])
        self.model.train()
        fix_eval_modules(self.eval_modules, self.norm_eval)
        targets = [t.to(self.device) for t in targets]
        with self.autocast() if self.autocast else contextlib.nullcontext():
            loss_dict = self.model(images.to(self.device), targets)
        losses = sum(loss.float() for loss in loss_dict.values())
        self.optimizer.zero_grad()
        if self.scaler is not None:
            self.scaler.scale(losses).backward()
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, as apex does
        else:
            losses.backward()
        if self.clip:
            verbose = (iteration % self.cfg.SOLVER.PRINT_GRAD_FREQ) == 0 or self.print_first_grad
            self.print_first_grad = False
            clip_grad_norm([(n, p) for n, p in self.model.named_parameters()
                            if p.requires_grad], max_norm=self.cfg.SOLVER.GRAD_NORM_CLIP,
                           logger=self.logger, verbose=verbose, clip=True)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)  # skipped on inf/nan gradients, as apex O1
            self.scaler.update()
        else:
            self.optimizer.step()
        logged = all_reduce_mean(dict(loss_dict))
        logged = dict([('loss', sum(logged.values()))] + list(logged.items()))
        return {'losses': {k: [(v, 1)] for k, v in logged.items()},
                'lr': self.optimizer.param_groups[-1]['lr'], 'batch_size': len(targets)}
