"""Curves pictures: size, PNG validity, redraw points, equality with the metrics-file path."""
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from gluontrain.core.hooks import LossMeterHook, MetricsJSONHook, ValidationHook
from gluontrain.core.loop import Hook, run_loop
from gluontrain.core.meters import LossMeter
from gluontrain.core import plots
from gluontrain.core.plots import CurvesHook, draw_curves, plot_curves, read_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'


def _pixels(path):
    """Check the signature and decode; returns an (H, W, C) array."""
    import matplotlib.image as mpimg
    with open(path, 'rb') as f:
        assert f.read(8) == PNG_SIGNATURE
    return mpimg.imread(path)


def _records(scale=1.0, epochs=4):
    return [{'epoch': e, 'lr': 1e-3 * (0.1 if e >= 3 else 1.0),
             'loss_epoch': {'ObjLoss': scale * 10.0 / (e + 1), 'ClassLoss': scale * 2.0},
             'val': {'mAP': 0.1 * e}} for e in range(epochs)]


def test_draw_curves_is_an_800x600_png_and_changes_with_the_data(tmp_path):
    a, b = str(tmp_path / 'a.png'), str(tmp_path / 'b.png')
    draw_curves(_records(), a)
    draw_curves(_records(scale=3.0), b)
    pa, pb = _pixels(a), _pixels(b)
    assert pa.shape[:2] == (600, 800) and pb.shape[:2] == (600, 800)
    assert not np.array_equal(pa, pb)
    # deterministic: the same records give the same pixels
    draw_curves(_records(), b)
    assert np.array_equal(pa, _pixels(b))
    # not a blank canvas
    assert pa[..., :3].std() > 0.05


def _step(values):
    it = iter(values)

    def step(batch, state):
        v = next(it)
        return {'losses': {'ObjLoss': [(v, 1)], 'ClassLoss': [(2 * v, 1)]}, 'lr': 1e-3 * v}
    return step


class _Probe(Hook):
    """Records whether the picture exists after every epoch's hooks ran."""

    def __init__(self, path):
        self.path, self.seen = path, []

    def after_epoch(self, state):
        self.seen.append(os.path.exists(self.path))


def test_hook_draws_after_validations_and_equals_plot_curves(tmp_path):
    meter = LossMeter()
    png, jsonl = str(tmp_path / 'run_curves.png'), str(tmp_path / 'run_metrics.jsonl')
    scores = iter([0.25, 0.5])
    curves = CurvesHook(png, meter, title='run', min_interval_s=0)
    probe = _Probe(png)
    hooks = [LossMeterHook(meter), ValidationHook(lambda: (['a', 'mAP'], [0.0, next(scores)]),
                                                  val_interval=2),
             MetricsJSONHook(jsonl, meter), curves, probe]
    run_loop(_step([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]), range(2), hooks, 0, 4)
    # epoch 0 has no validation, epoch 1 has: the first picture appears then
    assert probe.seen == [False, True, True, True]
    assert [r['epoch'] for r in curves.records] == [0, 1, 2, 3]
    assert curves.records[1]['loss_epoch'] == {'ObjLoss': 3.5, 'ClassLoss': 7.0}
    assert curves.records[3]['val'] == {'a': 0.0, 'mAP': 0.5}
    again = str(tmp_path / 'again.png')
    plot_curves(jsonl, again, title='run')
    assert np.array_equal(_pixels(png), _pixels(again))


def test_hook_does_not_redraw_at_the_end_what_the_last_validation_drew(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(plots, 'draw_curves', lambda records, path, title=None: drawn.append(
        [r['epoch'] for r in records]))
    meter = LossMeter()
    hooks = [LossMeterHook(meter), ValidationHook(lambda: (['mAP'], [0.5]), val_interval=1),
             CurvesHook(str(tmp_path / 'c.png'), meter, min_interval_s=0)]
    run_loop(_step([1.0, 2.0]), range(1), hooks, 0, 2)
    # one picture per validated epoch; the end of training adds nothing new
    assert drawn == [[0], [0, 1]]
    # without a validation at the last epoch, the end draws the records once more
    drawn.clear()
    hooks[1] = ValidationHook(lambda: (['mAP'], [0.5]), val_interval=2)
    hooks[2] = CurvesHook(str(tmp_path / 'd.png'), meter, min_interval_s=0)
    run_loop(_step([1.0, 2.0, 3.0]), range(1), hooks, 0, 3)
    assert drawn == [[0, 1], [0, 1, 2]]


def test_a_run_shorter_than_the_redraw_interval_draws_its_curves_once(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(plots, 'draw_curves', lambda records, path, title=None: drawn.append(
        [r['epoch'] for r in records]))
    assert plots.REDRAW_INTERVAL_S == 20.0
    meter = LossMeter()
    hooks = [LossMeterHook(meter), ValidationHook(lambda: (['mAP'], [0.5]), val_interval=1),
             CurvesHook(str(tmp_path / 'c.png'), meter)]
    run_loop(_step([1.0, 2.0, 3.0]), range(1), hooks, 0, 3)
    assert drawn == [[0, 1, 2]]
    # an epoch that ends after the interval redraws at once
    drawn.clear()
    hooks[2] = CurvesHook(str(tmp_path / 'd.png'), meter)
    # the hook's clock, read at: start of training, epochs 0, 1, after the draw, epoch 2, ...
    clock = iter([0.0, 5.0, 25.0, 26.0, 30.0, 31.0])
    monkeypatch.setattr(plots, 'time', types.SimpleNamespace(monotonic=lambda: next(clock)))
    run_loop(_step([1.0, 2.0, 3.0]), range(1), hooks, 0, 3)
    # epoch 0 at 5 s: skipped; epoch 1 at 25 s: drawn (until 26 s); epoch 2 at 30 s:
    # skipped; the end draws the last records
    assert drawn == [[0, 1], [0, 1, 2]]


def test_resumed_hook_draws_the_earlier_epochs_from_history(tmp_path):
    jsonl = tmp_path / 'm.jsonl'
    jsonl.write_text(''.join(json.dumps(r) + '\n' for r in _records(epochs=3)))
    meter = LossMeter()
    curves = CurvesHook(str(tmp_path / 'c.png'), meter, history=str(jsonl))
    run_loop(_step([1.0, 2.0]), range(1), [LossMeterHook(meter), curves], 2, 4)
    # epochs 0-1 from the file, 2-3 from this run (the file's epoch 2 is superseded)
    assert [r['epoch'] for r in curves.records] == [0, 1, 2, 3]
    assert curves.records[2]['loss_epoch'] == {'ObjLoss': 1.0, 'ClassLoss': 2.0}
    assert _pixels(str(tmp_path / 'c.png')).shape[:2] == (600, 800)


def test_read_metrics_skips_truncated_lines_and_keeps_the_last_record_per_epoch(tmp_path):
    recs = _records(epochs=2)
    redo = dict(recs[1], lr=0.5)
    path = tmp_path / 'm.jsonl'
    path.write_text(json.dumps(recs[0]) + '\n' + json.dumps(recs[1]) + '\n\n'
                    + json.dumps(redo) + '\n' + '{"epoch": 2, "lr"')
    out = read_metrics(str(path))
    assert [r['epoch'] for r in out] == [0, 1] and out[1]['lr'] == 0.5


def test_nan_losses_and_text_metrics_do_not_break_drawing(tmp_path):
    recs = _records(epochs=2)
    recs[0]['loss_epoch']['ObjLoss'] = None      # NaN written as null
    recs[1]['val'] = {'summary': '~~~~ text ~~~~', 'mAP': None}  # COCO text + NaN
    assert _pixels(draw_curves(recs, str(tmp_path / 'x.png'))).shape[:2] == (600, 800)


@pytest.mark.parametrize('out', [None, 'given.png'])
def test_plot_log_script(tmp_path, out):
    jsonl = tmp_path / 'yolo3_x_metrics.jsonl'
    jsonl.write_text(''.join(json.dumps(r) + '\n' for r in _records()))
    cmd = [sys.executable, os.path.join(ROOT, 'scripts', 'plot_log.py'), str(jsonl)]
    if out:
        cmd += ['-o', str(tmp_path / out)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    expected = str(tmp_path / (out or 'yolo3_x_curves.png'))
    assert res.stdout.strip() == expected
    assert _pixels(expected).shape[:2] == (600, 800)


class _StopAt(Hook):
    """Validates at iteration ``n`` and stops there, inside an epoch (SSD's max_iter)."""

    def __init__(self, n):
        self.n = n

    def after_batch(self, state):
        if state.iteration == self.n:
            state.scores['val'] = (['mAP'], [0.75])
            state.stop('max_iter')


def test_run_stopped_inside_an_epoch_draws_that_partial_epoch(tmp_path):
    meter = LossMeter()
    png = str(tmp_path / 'c.png')
    curves = CurvesHook(png, meter)
    # 3 batches per epoch, stop after the 5th step: epoch 1 has seen 2 of its batches
    run_loop(_step([1.0, 2.0, 3.0, 4.0, 5.0]), range(3), [LossMeterHook(meter), _StopAt(5),
                                                          curves], 0, 10)
    assert [r['epoch'] for r in curves.records] == [0, 1]
    assert curves.records[1]['loss_epoch'] == {'ObjLoss': 4.5, 'ClassLoss': 9.0}
    assert 'val' not in curves.records[0] and curves.records[1]['val'] == {'mAP': 0.75}
    assert _pixels(png).shape[:2] == (600, 800)


def test_a_score_is_recorded_for_the_epoch_that_measured_it_only(tmp_path):
    meter = LossMeter()
    curves = CurvesHook(str(tmp_path / 'c.png'), meter)

    class _ValidateOnce(Hook):
        def after_epoch(self, state):
            if state.epoch == 0:
                state.scores['val'] = (['mAP'], [0.5])  # never popped afterwards

    run_loop(_step([1.0, 2.0, 3.0]), range(1), [LossMeterHook(meter), _ValidateOnce(),
                                                curves], 0, 3)
    assert ['val' in r for r in curves.records] == [True, False, False]


def test_samples_hook_draws_after_validations_and_only_warns_on_errors(tmp_path):
    from gluontrain.core.loop import TrainState
    from gluontrain.core.plots import SamplesHook, draw_samples
    calls = []
    img = np.zeros((50, 100, 3), np.uint8)

    def draw(title):
        calls.append(title)
        return draw_samples([(img, np.array([[10, 10, 40, 30]]),
                              ([1], [0.9], np.array([[12, 8, 44, 33]])))] * 3,
                            ['a', 'b'], str(tmp_path / 's.png'), title=title)
    hook = SamplesHook(draw, min_interval_s=0)
    state = TrainState(epoch=2)
    hook.after_epoch(state)
    assert calls == []
    state.scores['val'] = (['mAP'], [0.1])
    hook.after_epoch(state)
    hook.after_train(state)  # already drawn for this score
    assert calls == ['epoch 2']
    # within the redraw interval the epoch's picture waits for the end of training, titled
    # with its epoch; a later validation inside an epoch is titled with its iteration
    calls.clear()
    hook = SamplesHook(draw)
    hook.before_train(state)
    hook.after_epoch(state)
    assert calls == []
    hook.after_train(state)
    state.scores['val'] = (['mAP'], [0.2])
    hook.after_train(TrainState(iteration=7, scores={'val': (['mAP'], [0.2])}))
    assert calls == ['epoch 2', 'iteration 7']
    # three images: two columns, two rows of 400 x 400
    assert _pixels(str(tmp_path / 's.png')).shape[:2] == (800, 800)

    def broken(title):
        raise OSError('disk full')
    with pytest.warns(UserWarning, match='disk full'):
        SamplesHook(broken).after_train(TrainState(scores={'val': (['mAP'], [0.1])}))


def test_a_figure_drawn_while_training_is_freed_at_once(tmp_path, monkeypatch):
    """A matplotlib figure is a web of reference cycles; with the cyclic collector idle (as
    between a training process's rare full passes) both picture hooks still free the figure
    of a validation's draw before the next epoch trains, instead of leaving its megabytes
    resident under the steps that follow."""
    import gc
    import weakref
    from gluontrain.core.plots import SamplesHook, draw_samples
    made = []
    original = plots.new_figure

    def tracked(*args, **kwargs):
        fig = original(*args, **kwargs)
        made.append(weakref.ref(fig))
        return fig
    monkeypatch.setattr(plots, 'new_figure', tracked)
    img = np.zeros((50, 100, 3), np.uint8)
    samples = SamplesHook(lambda title: draw_samples(
        [(img, np.array([[10, 10, 40, 30]]), ([1], [0.9], np.array([[12, 8, 44, 33]])))],
        ['a', 'b'], str(tmp_path / 's.png'), title=title), min_interval_s=0)
    meter = LossMeter()
    curves = CurvesHook(str(tmp_path / 'c.png'), meter, min_interval_s=0)
    alive = []

    class Alive(Hook):  # after both picture hooks, before the next epoch
        def after_epoch(self, state):
            alive.append([ref() is not None for ref in made])
    hooks = [LossMeterHook(meter), ValidationHook(lambda: (['mAP'], [0.5]), val_interval=1),
             curves, samples, Alive()]
    gc.collect()
    gc.disable()
    try:
        run_loop(_step([1.0, 2.0, 3.0, 4.0]), range(2), hooks, 0, 2)
    finally:
        gc.enable()
    assert alive == [[False, False], [False, False, False, False]]
    assert os.path.getsize(str(tmp_path / 'c.png')) > 0
    assert os.path.getsize(str(tmp_path / 's.png')) > 0


def _captured_figure(monkeypatch):
    """Make draw_curves hand over its figure so its axes can be inspected."""
    from gluontrain.core import plots
    made = []
    original = plots.new_figure

    def keep(*args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]
    monkeypatch.setattr(plots, 'new_figure', keep)
    return made


def test_loss_axis_is_logarithmic_so_a_huge_first_epoch_does_not_flatten_the_rest(
        tmp_path, monkeypatch):
    made = _captured_figure(monkeypatch)
    # YOLOv3 from random weights: ObjLoss 108 then ~10, the other losses 3 to 7
    recs = [{'epoch': e, 'lr': 1e-3, 'loss_epoch': {
        'ObjLoss': [108.0, 12.0, 10.5, 9.8][e], 'BoxCenterLoss': 7.0 - e,
        'BoxScaleLoss': 5.0 - e, 'ClassLoss': 6.0 - 0.5 * e}} for e in range(4)]
    draw_curves(recs, str(tmp_path / 'c.png'))
    ax_loss = made[-1].axes[0]
    assert ax_loss.get_yscale() == 'log'
    assert 'log scale' in ax_loss.get_ylabel()
    low, high = ax_loss.get_ylim()
    assert low <= 2.0 and high >= 108.0
    # the small losses' falls take over 4 times the share of the axis height that they
    # would get on a linear axis from 0 to 108 (there BoxScaleLoss's 5 -> 2 is under 3 %)
    span = np.log(high) - np.log(low)
    small = [line for line in ax_loss.get_lines() if line.get_label() != 'ObjLoss']
    assert len(small) == 3
    for line in small:
        y = line.get_ydata()
        log_share = (np.log(y[0]) - np.log(y[-1])) / span
        assert log_share > 4 * (y[0] - y[-1]) / 108.0, line.get_label()


def test_loss_axis_stays_linear_when_a_loss_is_not_positive(tmp_path, monkeypatch):
    made = _captured_figure(monkeypatch)
    recs = [{'epoch': e, 'lr': 1e-3, 'loss_epoch': {'a': 1.0 - e, 'b': 2.0}} for e in range(3)]
    draw_curves(recs, str(tmp_path / 'd.png'))
    assert made[-1].axes[0].get_yscale() == 'linear'
