"""Loss meters with the arithmetic of ``mx.metric.Loss``.

GluonCV's scripts never reset their loss metrics, so the value they log is a running mean since
the first epoch of the process. :class:`LossMeter` keeps that running mean (to reproduce the
reference lines) and the mean of the current epoch alongside it.
"""
import math
from collections import OrderedDict


class LossMeter:
    """Running and per-epoch means of named losses.

    Each update adds ``(sum, count)`` pairs, one per device, exactly as ``mx.metric.Loss.update``
    adds ``sum(pred)`` and ``pred.size`` for every device's loss array, so the running means equal
    the reference's logged values.
    """

    def __init__(self, names=()):
        self.names = list(names)
        self._run = OrderedDict((n, [0.0, 0]) for n in self.names)
        self._epoch = OrderedDict((n, [0.0, 0]) for n in self.names)

    def update(self, losses):
        """Add one step's losses.

        Parameters
        ----------
        losses : dict
            ``name -> list of (sum, count)``, one pair per device.
        """
        for name, parts in losses.items():
            if name not in self._run:
                self.names.append(name)
                self._run[name] = [0.0, 0]
                self._epoch[name] = [0.0, 0]
            for total, count in parts:
                for acc in (self._run[name], self._epoch[name]):
                    acc[0] += total
                    acc[1] += count

    def reset_epoch(self):
        """Start a new epoch's means; the running means carry on."""
        for acc in self._epoch.values():
            acc[0], acc[1] = 0.0, 0

    @staticmethod
    def _means(accs):
        return OrderedDict((n, (s / c) if c else float('nan')) for n, (s, c) in accs.items())

    def running(self):
        """Means since the meter was created (or restored): what GluonCV logs."""
        return self._means(self._run)

    def epoch(self):
        """Means over the current epoch only."""
        return self._means(self._epoch)

    def state_dict(self):
        """Sums and counts, for checkpoints."""
        return {'names': list(self.names), 'run': {k: list(v) for k, v in self._run.items()},
                'epoch': {k: list(v) for k, v in self._epoch.items()}}

    def load_state_dict(self, state):
        """Restore what :meth:`state_dict` returned."""
        self.names = list(state['names'])
        self._run = OrderedDict((n, list(state['run'][n])) for n in self.names)
        self._epoch = OrderedDict((n, list(state['epoch'][n])) for n in self.names)


def all_finite(losses):
    """True when every ``(sum, count)`` in a step's losses is a finite number."""
    return all(math.isfinite(total) for parts in losses.values() for total, _ in parts)
