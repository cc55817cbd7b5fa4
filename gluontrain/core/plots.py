"""Training curves as pictures: per-epoch losses, the validation metric and the learning rate.

Backend-free (matplotlib and numpy only). Figures are drawn on matplotlib's Agg canvas directly
(``matplotlib.figure.Figure`` + ``FigureCanvasAgg``) instead of through ``pyplot``, so drawing
never switches the global backend of a notebook or a GUI session and needs no display.
"""
import json
import math

from .checkpoint import atomic_save_file
from .loop import Hook

# pixel size of the curves picture: figsize * dpi
CURVES_FIGSIZE = (8.0, 6.0)
CURVES_DPI = 100


def new_figure(figsize, dpi):
    """A matplotlib ``Figure`` on an Agg canvas (no pyplot, no global backend change).

    Parameters
    ----------
    figsize : (float, float)
        Inches.
    dpi : int
        Pixels per inch; the PNG is ``figsize * dpi`` pixels.
    """
    # imported here: importing the package must not need matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # pylint: disable=import-outside-toplevel
    from matplotlib.figure import Figure  # pylint: disable=import-outside-toplevel
    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def save_png(fig, path):
    """Write ``fig`` to ``path`` as PNG, atomically (readers see the old or the new picture)."""
    atomic_save_file(path, lambda f: fig.savefig(f, format='png', dpi=fig.dpi))
    return path


def _number(value):
    """A float, or None for missing, NaN and text values (COCO's metric returns a text table)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def main_metric(val):
    """``(name, value)`` of the main validation metric: the last entry, as GluonCV puts it.

    Parameters
    ----------
    val : dict or (names, values)
        A metrics.jsonl ``val`` record or ``state.scores['val']``.
    """
    if not val:
        return None, None
    names, values = (list(val.keys()), list(val.values())) if isinstance(val, dict) else val
    return names[-1], _number(values[-1])


def draw_curves(records, path, title=None):
    """Draw losses, validation metric and learning rate per epoch, and save them as a PNG.

    Parameters
    ----------
    records : list of dict
        One per epoch, as in ``{prefix}_metrics.jsonl``: ``epoch``, ``lr``, ``loss_epoch``
        (name -> per-epoch mean) and, on validated epochs, ``val`` (name -> value).
    path : str
        The PNG to (over)write; ``CURVES_FIGSIZE * CURVES_DPI`` pixels (800 x 600).
    title : str, optional

    Returns
    -------
    str
        ``path``.
    """
    records = sorted(records, key=lambda r: r['epoch'])
    fig = new_figure(CURVES_FIGSIZE, CURVES_DPI)
    ax_loss, ax_val = fig.subplots(2, 1, sharex=True, gridspec_kw={'height_ratios': [3, 2]})
    epochs = [r['epoch'] for r in records]
    names = []
    for r in records:
        names += [n for n in (r.get('loss_epoch') or {}) if n not in names]
    for name in names:
        ys = [_number((r.get('loss_epoch') or {}).get(name)) for r in records]
        ax_loss.plot(epochs, [float('nan') if y is None else y for y in ys], marker='o',
                     markersize=3, label=name)
    ax_loss.set_ylabel('loss (epoch mean)')
    ax_loss.grid(True, alpha=0.3)
    # the LR spans decades during warm-up and decay, so it gets its own axis
    ax_lr = ax_loss.twinx()
    lrs = [_number(r.get('lr')) for r in records]
    ax_lr.plot(epochs, [float('nan') if v is None else v for v in lrs], color='0.4',
               linestyle='--', marker='.', label='lr')
    ax_lr.set_ylabel('learning rate')
    ax_lr.ticklabel_format(axis='y', style='sci', scilimits=(-2, 2))
    handles = ax_loss.get_legend_handles_labels()
    extra = ax_lr.get_legend_handles_labels()
    if handles[0] or extra[0]:
        ax_loss.legend(handles[0] + extra[0], handles[1] + extra[1], loc='upper right',
                       fontsize='small')
    val_points = [(r['epoch'],) + main_metric(r.get('val')) for r in records if r.get('val')]
    val_points = [(e, n, v) for e, n, v in val_points if v is not None]
    if val_points:
        metric = val_points[-1][1]
        ax_val.plot([p[0] for p in val_points], [p[2] for p in val_points], marker='o',
                    color='tab:green', label=metric)
        best = max(val_points, key=lambda p: p[2])
        # text left of the point when it is the last epoch, so it stays inside the axes
        at_end = best[0] == val_points[-1][0] and len(val_points) > 1
        ax_val.annotate('best {:.4f} @ {}'.format(best[2], best[0]), (best[0], best[2]),
                        textcoords='offset points', xytext=(-6 if at_end else 6, -12),
                        ha='right' if at_end else 'left', fontsize='small')
        ax_val.set_ylabel(metric)
        ax_val.legend(loc='lower right', fontsize='small')
    else:
        ax_val.text(0.5, 0.5, 'no validation yet', ha='center', va='center',
                    transform=ax_val.transAxes, color='0.5')
    ax_val.grid(True, alpha=0.3)
    ax_val.set_xlabel('epoch')
    if epochs:
        # whole epochs only on the x axis
        from matplotlib.ticker import MaxNLocator  # pylint: disable=import-outside-toplevel
        ax_val.xaxis.set_major_locator(MaxNLocator(integer=True))
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_png(fig, path)


def read_metrics(metrics_jsonl_path):
    """The records of a ``{prefix}_metrics.jsonl`` file (blank or truncated lines skipped).

    A resumed run appends to the same file, so a later record of an epoch replaces an earlier
    one.
    """
    by_epoch = {}
    with open(metrics_jsonl_path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash mid-write
            by_epoch[record['epoch']] = record
    return [by_epoch[e] for e in sorted(by_epoch)]


def plot_curves(metrics_jsonl_path, out_png, title=None):
    """Draw the curves picture of a finished (or running) run from its metrics file.

    Parameters
    ----------
    metrics_jsonl_path : str
        ``{prefix}_metrics.jsonl`` as :class:`gluontrain.core.hooks.MetricsJSONHook` writes it.
    out_png : str
        Where the picture goes.
    title : str, optional

    Returns
    -------
    str
        ``out_png``.
    """
    return draw_curves(read_metrics(metrics_jsonl_path), out_png, title=title)


class CurvesHook(Hook):
    """(Re)draws ``path`` after every validation and at the end of training.

    Parameters
    ----------
    path : str
        The PNG, usually ``{prefix}_curves.png``.
    meter : LossMeter
        Its ``epoch()`` means are collected at every ``after_epoch``; place this hook after the
        validation hook so that the epoch's score is in ``state.scores['val']``.
    history : str, optional
        A metrics.jsonl whose epochs before the start epoch are drawn too (for resumed runs).
    title : str, optional
    """

    def __init__(self, path, meter, history=None, title=None):
        self.path, self.meter, self.history, self.title = path, meter, history, title
        self.records = []

    def before_train(self, state):
        self.records = []
        if self.history:
            try:
                self.records = [r for r in read_metrics(self.history)
                                if r['epoch'] < state.start_epoch]
            except (OSError, KeyError):
                self.records = []

    def after_epoch(self, state):
        record = {'epoch': state.epoch, 'lr': state.outputs.get('lr'),
                  'loss_epoch': dict(self.meter.epoch())}
        if 'val' in state.scores:
            names, values = state.scores['val']
            record['val'] = dict(zip(names, values))
        self.records.append(record)
        if 'val' in state.scores:
            self.draw()

    def after_train(self, state):
        if self.records:
            self.draw()

    def draw(self):
        """Write the picture from the records collected so far."""
        return draw_curves(self.records, self.path, title=self.title)
