"""Training curves as pictures: per-epoch losses, the validation metric and the learning rate.

Backend-free (matplotlib and numpy only). Figures are drawn on an Agg canvas directly, never
through ``pyplot``, so drawing never switches a notebook's or GUI's backend and needs no display.
"""
import gc
import json
import math
import time

from .checkpoint import atomic_save_file
from .hooks import epoch_record, unfinished_epoch
from .loop import Hook

# pixel size of the curves picture: figsize * dpi
CURVES_FIGSIZE = (8.0, 6.0)
CURVES_DPI = 100
# pixel size of the samples picture: SAMPLES_CELL inches per image, SAMPLES_DPI
SAMPLES_CELL = 4.0
SAMPLES_DPI = 100
# A picture is redrawn after a validation only when the last one is at least this old, and
# always at the end (docs/recipes.md, "Shared code and pictures").
REDRAW_INTERVAL_S = 20.0


def new_figure(figsize, dpi):
    """A matplotlib ``Figure`` of ``figsize`` inches at ``dpi`` on an Agg canvas (no pyplot)."""
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
    """``(name, value)`` of the main validation metric, the last entry as GluonCV puts it, of a
    metrics.jsonl ``val`` record or ``state.scores['val']``."""
    if not val:
        return None, None
    names, values = (list(val.keys()), list(val.values())) if isinstance(val, dict) else val
    return names[-1], _number(values[-1])


def draw_curves(records, path, title=None):
    """Draw losses, validation metric and learning rate per epoch into the PNG ``path``
    (800 x 600, overwritten); returns ``path``.

    ``records``: one per epoch, as in ``{prefix}_metrics.jsonl``: ``epoch``, ``lr``,
    ``loss_epoch`` (name -> epoch mean) and, on validated epochs, ``val`` (name -> value).
    """
    records = sorted(records, key=lambda r: r['epoch'])
    fig = new_figure(CURVES_FIGSIZE, CURVES_DPI)
    ax_loss, ax_val = fig.subplots(2, 1, sharex=True, gridspec_kw={'height_ratios': [3, 2]})
    epochs = [r['epoch'] for r in records]
    names = list(dict.fromkeys(n for r in records for n in (r.get('loss_epoch') or {})))
    finite = []
    for name in names:
        ys = [_number((r.get('loss_epoch') or {}).get(name)) for r in records]
        finite += [y for y in ys if y is not None]
        ax_loss.plot(epochs, [float('nan') if y is None else y for y in ys], marker='o',
                     markersize=3, label=name)
    # The first epoch's objectness / confidence loss from random weights is ten times the later
    # ones: on a log axis each loss's trend shows whatever its size.
    if finite and min(finite) > 0:
        _log_axis(ax_loss.yaxis, ax_loss.set_yscale, min(finite), max(finite))
        ax_loss.set_ylabel('loss (epoch mean, log scale)')
    else:
        ax_loss.set_ylabel('loss (epoch mean)')
    ax_loss.grid(True, which='both', alpha=0.3)
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
    # fixed margins instead of tight_layout: the same picture at 800 x 600, while measuring
    # every text's extent was a third of each redraw
    fig.subplots_adjust(left=0.1, right=0.89, bottom=0.08, top=0.91 if title else 0.96,
                        hspace=0.08)
    return save_png(fig, path)


def _log_axis(axis, set_scale, low, high):
    """Log scale with plain-number labels on the minor ticks too (few decades span a run)."""
    from matplotlib.ticker import LogFormatter  # pylint: disable=import-outside-toplevel
    set_scale('log')
    # the default labels only powers of ten; losses between 2 and 9 would get no number
    fmt = LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 1))
    axis.set_major_formatter(fmt)
    axis.set_minor_formatter(fmt)
    if high / low < 1.5:  # nearly flat: give the axis room so the ticks are not all one label
        axis.axes.set_ylim(low / 1.5, high * 1.5)


def read_metrics(metrics_jsonl_path):
    """The records of a ``{prefix}_metrics.jsonl`` file (blank or truncated lines skipped); a
    later record of an epoch (a resumed run appends) replaces an earlier one."""
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
    """Draw the curves picture of a run from its ``{prefix}_metrics.jsonl``
    (:class:`gluontrain.core.hooks.MetricsJSONHook`) into ``out_png``; returns ``out_png``."""
    return draw_curves(read_metrics(metrics_jsonl_path), out_png, title=title)


class _RedrawHook(Hook):
    """What the picture hooks share: the redraw interval (:data:`REDRAW_INTERVAL_S`) and the
    time of the last draw, counted from the start of training."""

    def _init_redraw(self, min_interval_s):
        self.min_interval_s = REDRAW_INTERVAL_S if min_interval_s is None else min_interval_s
        self._drawn_at = time.monotonic()

    def before_train(self, state):
        self._drawn_at = time.monotonic()

    def _redraw_due(self):
        """Whether the picture is at least ``min_interval_s`` old."""
        return time.monotonic() - self._drawn_at >= self.min_interval_s

    def _drawn_now(self):
        self._drawn_at = time.monotonic()

    @staticmethod
    def _free_figure():
        """Free the figure just drawn while training goes on (a web of reference cycles the
        cyclic collector rarely reaches: docs/performance.md, "On the README main job's
        settings"); not after the last
        draw of a run."""
        gc.collect()


class CurvesHook(_RedrawHook):
    """(Re)draws ``path`` (usually ``{prefix}_curves.png``) after every validation and at the end.

    Parameters
    ----------
    meter : LossMeter
        Its ``epoch()`` means are collected at every ``after_epoch``; place this hook after the
        validation hook so that the epoch's score is in ``state.scores['val']``.
    history : str, optional
        A metrics.jsonl whose epochs before the start epoch are drawn too (resumed runs whose
        checkpoint did not carry this hook's state).
    min_interval_s : float, optional
        Default :data:`REDRAW_INTERVAL_S`; 0 redraws after every validation.
    """
    main_process_only = True  # draws the curves picture

    def __init__(self, path, meter, history=None, title=None, min_interval_s=None):
        self.path, self.meter, self.history, self.title = path, meter, history, title
        self.records = []
        self._restored = None
        self._drawn = None  # the records the picture on disk shows
        self._init_redraw(min_interval_s)

    def state_dict(self):
        return {'records': [dict(r) for r in self.records]}

    def load_state_dict(self, state_dict):
        self._restored = [dict(r) for r in state_dict['records']]

    def before_train(self, state):
        super().before_train(state)
        self.records = []
        if self._restored is not None:
            self.records = [r for r in self._restored if r['epoch'] < state.start_epoch]
        elif self.history:
            try:
                self.records = [r for r in read_metrics(self.history)
                                if r['epoch'] < state.start_epoch]
            except (OSError, KeyError):
                self.records = []

    def _record(self, state):
        self.records.append(epoch_record(state, self.meter))
        return self.records[-1]

    def after_epoch(self, state):
        if 'val' in self._record(state) and self._redraw_due():
            self.draw()
            self._free_figure()

    def after_train(self, state):
        last = self.records[-1]['epoch'] if self.records else None
        if unfinished_epoch(state, last, self.meter):
            self._record(state)
        # the last validated epoch already drew these records: a second draw (0.3-0.6 s of
        # matplotlib) would write the same picture
        if self.records and self.records != self._drawn:
            self.draw()

    def draw(self):
        """Write the picture from the records collected so far."""
        self._drawn = [dict(r) for r in self.records]
        path = draw_curves(self.records, self.path, title=self.title)
        self._drawn_now()
        return path


def samples_figsize(num):
    """``(width, height)`` in inches of the grid for ``num`` images (two columns)."""
    cols = 2 if num > 1 else 1
    rows = (num + cols - 1) // cols
    return SAMPLES_CELL * cols, SAMPLES_CELL * rows


def draw_boxes(ax, bboxes, labels, color, style):
    """Rectangles ``[x0, y0, x1, y1]`` on matplotlib axes ``ax``, each with its label text
    (an empty label draws no text)."""
    from matplotlib.patches import Rectangle  # pylint: disable=import-outside-toplevel
    for (x0, y0, x1, y1), text in zip(bboxes, labels):
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor=color,
                               linewidth=1.5, linestyle=style))
        if text:
            ax.text(x0, y0, text, fontsize=7, color='white', va='bottom',
                    bbox={'facecolor': color, 'alpha': 0.7, 'pad': 1, 'edgecolor': 'none'})


def draw_samples(samples, classes, path, thresh=0.2, max_boxes=10, title=None):
    """Ground truth (cyan, dashed) and predictions (red, ``class score``) on a grid of images,
    saved as the PNG ``path``; returns ``path``.

    ``samples``: ``(image, gt_boxes, (ids, scores, bboxes))``, ``image`` HxWx3 RGB (uint8 or
    floats in [0, 1]), boxes ``x0, y0, x1, y1`` in its pixels, ``ids`` index ``classes``.
    At most ``max_boxes`` predictions of score ``>= thresh`` per image.
    """
    import numpy as np  # pylint: disable=import-outside-toplevel
    num = len(samples)
    fig = new_figure(samples_figsize(num), SAMPLES_DPI)
    cols = 2 if num > 1 else 1
    rows = (num + cols - 1) // cols
    for i, (img, gt, (ids, scores, bboxes)) in enumerate(samples):
        ids, scores, bboxes = np.asarray(ids), np.asarray(scores), np.asarray(bboxes)
        ax = fig.add_subplot(rows, cols, i + 1)
        ax.imshow(img)
        draw_boxes(ax, gt, [''] * len(gt), 'cyan', '--')
        order = np.argsort(-scores)[:max_boxes]
        order = order[scores[order] >= thresh]
        draw_boxes(ax, bboxes[order], ['{} {:.2f}'.format(class_name(classes, ids[k]),
                                                          scores[k]) for k in order],
                   'tab:red', '-')
        ax.set_title('image {}: {} gt, {} pred >= {:.2f}'.format(i, len(gt), len(order),
                                                                 thresh), fontsize=8)
        ax.axis('off')
    if title:
        fig.suptitle(title, fontsize=10)
    # fixed margins (as draw_curves): images without axes, a title line above each
    top = 1 - (0.35 if title else 0.1) / (SAMPLES_CELL * rows)
    fig.subplots_adjust(left=0.02, right=0.98, bottom=0.02, top=top, wspace=0.04,
                        hspace=0.12)
    return save_png(fig, path)


def class_name(classes, cid):
    """``classes[cid]``, or the id as text when there is no such name."""
    return classes[cid] if classes is not None and 0 <= cid < len(classes) else str(cid)


class SamplesHook(_RedrawHook):
    """After every validation (and at the end of training if the last one was not drawn),
    call ``draw_fn(title) -> path``; ``errors`` it raises only warn (a picture must never end
    a run). ``min_interval_s`` as :class:`CurvesHook`.
    """
    main_process_only = True  # draws the samples picture

    def __init__(self, draw_fn, errors=(OSError, ValueError, IndexError), min_interval_s=None):
        self.draw_fn, self.errors = draw_fn, tuple(errors)
        self._drawn = None
        self._epoch_val = None
        self._init_redraw(min_interval_s)

    def _draw(self, title):
        import warnings  # pylint: disable=import-outside-toplevel
        try:
            self.draw_fn(title)
        except self.errors as e:
            warnings.warn('val samples picture not written: {}'.format(e))
        self._drawn_now()

    def after_epoch(self, state):
        if 'val' in state.scores:
            self._epoch_val = (state.scores['val'], 'epoch {}'.format(state.epoch))
            if self._redraw_due():
                self._draw(self._epoch_val[1])
                self._free_figure()
                self._drawn = state.scores['val']

    def after_train(self, state):
        val = state.scores.get('val')
        if val is not None and val is not self._drawn:
            # an epoch's validation whose picture was skipped, or one inside an epoch
            # (iteration-based recipes stop there)
            title = self._epoch_val[1] if self._epoch_val and self._epoch_val[0] is val else \
                'iteration {}'.format(state.iteration)
            self._draw(title)
            self._drawn = val
