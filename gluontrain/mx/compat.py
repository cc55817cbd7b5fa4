"""Older GluonCV APIs that notebooks written for GluonCV 0.3 still call.

:class:`LRScheduler` is ``gluoncv.utils.LRScheduler`` of GluonCV 0.3.0 up to 0.4 (gluon-cv
commit 7c555523, the last before the rewrite in 3410d585): ``LRScheduler(mode=..., baselr=...,
niters=..., nepochs=..., step=..., ...)`` with ``lr_scheduler.update(i, epoch)`` before every
``trainer.step`` (docs/from_gluoncv.md, "GluonCV's own APIs")."""
from math import cos, pi

from mxnet import lr_scheduler as mx_lr_scheduler

__all__ = ['LRScheduler']


class LRScheduler(mx_lr_scheduler.LRScheduler):
    r"""GluonCV 0.3's epoch-aware learning-rate schedule, driven by ``update(i, epoch)``.

    With ``T = epoch * niters + i``, ``N = nepochs * niters`` and ``W = warmup_epochs *
    niters``:

    - while ``epoch < warmup_epochs``: ``warmup_lr + (baselr - warmup_lr) * T / W``
      (``warmup_mode='linear'``) or ``warmup_lr`` (``'constant'``);
    - then ``step``: ``baselr * step_factor ** k``, ``k`` the number of epochs in ``step``
      that are ``<= epoch``;
    - ``poly``: ``targetlr + (baselr - targetlr) * (1 - (T - W) / (N - W)) ** power``;
    - ``cosine``: ``targetlr + (baselr - targetlr) * (1 + cos(pi * (T - W) / (N - W))) / 2``.

    The trainer reads the value through ``__call__``, which ignores MXNet's update count and
    returns the value set by the last :meth:`update` (``baselr`` before the first).

    Parameters
    ----------
    mode : {'step', 'poly', 'cosine'}
        Schedule after the warm-up.
    baselr : float
        Learning rate after the warm-up (start of ``poly``/``cosine``).
    niters : int
        Updates per epoch.
    nepochs : int
        Number of epochs.
    step : sequence of int, default (30, 60, 90)
        Epochs at which ``step`` multiplies by ``step_factor``.
    step_factor : float, default 0.1
        Decay factor of ``step``.
    targetlr : float, default 0
        Final learning rate of ``poly`` and ``cosine``.
    power : float, default 0.9
        Exponent of ``poly``.
    warmup_epochs : int, default 0
        Epochs of warm-up.
    warmup_lr : float, default 0
        Learning rate at the start of the warm-up.
    warmup_mode : {'linear', 'constant'}
        Shape of the warm-up.

    Notes
    -----
    Kept as GluonCV 0.3 had it, including what surprises today: ``T`` counts ``niters``
    updates per epoch whatever the loader really yields, :meth:`update` raises
    ``AssertionError`` once ``T > N``, and ``step`` counts epochs, not updates.
    """

    def __init__(self, mode, baselr, niters, nepochs, step=(30, 60, 90), step_factor=0.1,
                 targetlr=0, power=0.9, warmup_epochs=0, warmup_lr=0, warmup_mode='linear'):
        super().__init__()
        if mode not in ('step', 'poly', 'cosine'):
            raise ValueError("mode must be 'step', 'poly' or 'cosine' (GluonCV 0.3), got "
                             '{!r}'.format(mode))
        if warmup_mode not in ('linear', 'constant'):
            raise ValueError("warmup_mode must be 'linear' or 'constant', got {!r}"
                             .format(warmup_mode))
        self.mode = mode
        self.baselr = baselr
        self.learning_rate = baselr
        self.niters = niters
        self.step = step
        self.step_factor = step_factor
        self.targetlr = targetlr
        self.power = power
        self.warmup_epochs = warmup_epochs
        self.warmup_lr = warmup_lr
        self.warmup_mode = warmup_mode
        self.N = nepochs * niters  # pylint: disable=invalid-name
        self.warmup_N = warmup_epochs * niters  # pylint: disable=invalid-name

    def __call__(self, num_update):
        """The value set by the last :meth:`update`; ``num_update`` is ignored."""
        return self.learning_rate

    def update(self, i, epoch):
        """Set ``learning_rate`` for batch ``i`` of epoch ``epoch`` (both from 0).

        Parameters
        ----------
        i : int
            Batch index within the epoch.
        epoch : int
            Epoch index.
        """
        T = epoch * self.niters + i  # pylint: disable=invalid-name
        assert 0 <= T <= self.N, 'update {} outside [0, nepochs * niters = {}]'.format(T, self.N)
        if self.warmup_epochs > epoch:
            if self.warmup_mode == 'linear':
                self.learning_rate = (self.warmup_lr + (self.baselr - self.warmup_lr)
                                      * T / self.warmup_N)
            else:
                self.learning_rate = self.warmup_lr
        elif self.mode == 'step':
            count = sum(1 for s in self.step if s <= epoch)
            self.learning_rate = self.baselr * pow(self.step_factor, count)
        else:
            progress = (T - self.warmup_N) / (self.N - self.warmup_N)
            if self.mode == 'poly':
                factor = pow(1 - progress, self.power)
            else:
                factor = (1 + cos(pi * progress)) / 2
            self.learning_rate = self.targetlr + (self.baselr - self.targetlr) * factor
