"""The step of Scene-Graph-Benchmark's ``relation_train_net.py`` and
``detector_pretrain_net.py``: :class:`SGGStep`, a ``LossDictStep`` with SGB's forward and
clipping (docs/recipes.md, "The recipes")."""
import logging

from ..step import LossDictStep
from .model import fix_eval_modules
from .solver import clip_grad_norm

__all__ = ['SGGStep']

_LOG = logging.getLogger('gluontrain.sgg')


class SGGStep(LossDictStep):
    """One SGB iteration: ``model(images, targets)`` -> loss dict, backward, optional
    ``clip_grad_norm`` at ``SOLVER.GRAD_NORM_CLIP``, ``optimizer.step()``; logs the total
    ``loss`` first and the last parameter group's learning rate.

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
        Passed to :func:`fix_eval_modules` (``model.frozen_norm_eval(cfg)``).
    autocast : callable, optional
        ``DTYPE "float16"`` (SGB's apex O1) as float16 autocast around the forward.
    scaler : torch.amp.GradScaler, optional
        Gradients are unscaled before clipping.
    """

    def __init__(self, model, optimizer, cfg, device, eval_modules=(), clip=True, logger=None,
                 norm_eval=True, autocast=None, scaler=None):
        super().__init__(self.forward, optimizer, grad_clip=self.clip_gradients if clip else None,
                         scaler=scaler, autocast=autocast, lr_group=-1, total='loss')
        self.model, self.cfg, self.device = model, cfg, device
        self.eval_modules, self.norm_eval = tuple(eval_modules), norm_eval
        self.logger = logger or _LOG
        self.print_first_grad = True
        self.iteration = 0

    def __call__(self, batch, state):
        self.iteration = state.iteration + 1
        return super().__call__(batch, state)

    def forward(self, batch):
        """``(loss dict in float32, images in the batch)``, the model in training mode with the
        frozen modules fixed again; SGB's error line for an image without targets."""
        images, targets, image_ids = batch
        if any(len(t) < 1 for t in targets):
            self.logger.error("Iteration=%d || Image Ids used for training %s || targets "
                              "Length=%s", self.iteration, list(image_ids),
                              [len(t) for t in targets])
        self.model.train()
        fix_eval_modules(self.eval_modules, self.norm_eval)
        targets = [t.to(self.device) for t in targets]
        loss_dict = self.model(images.to(self.device), targets)
        return {name: loss.float() for name, loss in loss_dict.items()}, len(targets)

    def clip_gradients(self):
        """SGB's ``clip_grad_norm`` of the trained parameters, verbose at ``PRINT_GRAD_FREQ``
        and on the process's first iteration."""
        verbose = (self.iteration % self.cfg.SOLVER.PRINT_GRAD_FREQ) == 0 or self.print_first_grad
        self.print_first_grad = False
        clip_grad_norm([(n, p) for n, p in self.model.named_parameters() if p.requires_grad],
                       max_norm=self.cfg.SOLVER.GRAD_NORM_CLIP, logger=self.logger,
                       verbose=verbose, clip=True)
