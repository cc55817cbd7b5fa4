"""Training equivalence of the PyTorch recipe with GluonCV's train_yolo3.py (the MXNet recipe,
equal to it line by line: tests/mx/yolo3/test_faithful.py): the same weights (Gluon's default
initialisation, numpy-seeded, as .params), the same generated VOC data and batches (-j 0,
fixed shape), 100 batches, then the VOC07 mAP. GluonCV's numbers are recorded in
tests/fixtures/yolo3_torch/training_mobilenet0.25.json by
tests/fixtures/make_yolo3_torch_training_fixture.py; that the file is what GluonCV records now
is checked with the other generators (``regenerate.py --check yolo3_torch_training``, run by
tests/fixtures/test_fixtures.py where ``GLUONTRAIN_REFERENCES`` is set; it was a test of this
module, 36 s on every run of the suite).

What float32 allows (docs/faithfulness.md, "YOLOv3 on PyTorch"): on the first batch, from the
same weights, the four losses agree within 1.1e-3 relative (MXNet's float32 BatchNorm sums
are the larger error: PyTorch in float64 is closer to PyTorch in float32 than to MXNet). From
the first update on, this from-scratch start is so ill-conditioned that PyTorch float32 and
PyTorch float64 differ per batch as much as PyTorch and MXNet do (median 8-35 % relative,
some batches over 100 %); what stays comparable are the losses' means over the run and the
final mAP. The bounds below are derived from an ensemble of nine float32 PyTorch runs that
differ only by rounding (AMD EPYC, AVX2, one thread): this machine's default kernels, ATen's
``default`` (unvectorised) kernels, oneDNN capped at SSE4.1, OpenBLAS's Sandybridge kernels
(NumPy's), and five runs whose initial weights were each moved by one float32 ulp up or down
at random (seeds 1-5); ATen AVX2 and OpenBLAS Haswell / Zen repeat the default run bit for bit.

* First batch (``FIRST_BATCH``), the only part of the run where the two are still tied: the
  deviation is the recording's own float32 error (MXNet's BatchNorm sums; recorded, so the
  same on every machine) plus ours. Ensemble, ``|ours / theirs - 1|``: ObjLoss 1.1-1.6e-5,
  BoxCenterLoss 0.7-1.3e-4, BoxScaleLoss 1.06-1.25e-3, ClassLoss 2.5-2.9e-4. Bound: the
  ensemble's mean plus 10 times its spread (max - min), rounded up. It catches what changes
  the first forward: ``ignore_iou_thresh`` 0.5 instead of GluonCV's 0.7 moves ObjLoss by
  1.9e-3 (27x its bound; the old common bound of 2e-3 let it pass), ``--label-smooth`` moves
  ClassLoss by 2.2e-3 (3x).
* Means over batches 1-99 (``WINDOW``, ``mean(ours) / mean(theirs) - 1``): the trajectories
  part at the first update, so these are two draws of a chaotic process. Ensemble (ObjLoss /
  BoxCenterLoss / BoxScaleLoss / ClassLoss): default kernels -0.014 / -0.013 / +0.019 /
  -0.007, ATen default +0.003 / +0.053 / +0.172 / -0.032, oneDNN SSE4.1 +0.034 / +0.051 /
  -0.012 / -0.057, OpenBLAS Sandybridge -0.015 / +0.082 / -0.190 / -0.038, ulp seeds 1-5
  -0.041..+0.009 / -0.014..+0.021 / -0.186..-0.005 / -0.036..+0.009. Bound: ``|mean| + 4 sd``
  of the nine (mean, sd: -0.009, 0.022; +0.023, 0.032; -0.059, 0.118; -0.027, 0.019), rounded
  up. Batches 1-99 rather than the second half (the old window): the early batches, larger
  and still nearly tied, halve the spread (second half: sd 0.057 / 0.063 / 0.196 / 0.046; its
  bounds 0.05 / 0.15 / 0.3 / 0.05, fitted to one run, failed under ATen default, ObjLoss
  +0.071 and BoxScaleLoss +0.353, under oneDNN SSE4.1, ObjLoss +0.085, under OpenBLAS
  Sandybridge, BoxCenterLoss +0.164, and on an AVX-512 Xeon, ObjLoss 0.0905). These bounds
  catch gross errors of the training only: an update without momentum (0 instead of 0.9)
  moves ObjLoss by +0.224 and ClassLoss by +0.400 (2.2x and 3.6x their bounds); weight decay
  0, momentum 0.8, ``ignore_iou_thresh`` 0.5 or label smoothing stay inside them (at most
  0.057 / 0.043 / 0.289 / 0.075): the first batch catches the last two, nothing here the
  first two.
"""
import json
import os
import re

import numpy as np
import pytest

from fixtures import make_yolo3_torch_training_fixture as fx
from gluontrain.core import mxparams
from gluontrain.data import synthetic
from gluontrain.torch.yolo3 import get_yolov3, main
from gluontrain.torch.yolo3 import step as torch_step
from gluontrain.torch.yolo3.weights import gluon_arrays

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, '..', '..', 'fixtures', fx.FIXTURE)
NAMES = ('ObjLoss', 'BoxCenterLoss', 'BoxScaleLoss', 'ClassLoss')
NUMBER = re.compile(r'nan|-?\d+\.\d+(?:E[+-]\d+)?|-?\d+')
#: ``|ours / theirs - 1|`` on the first batch, per loss (module docstring)
FIRST_BATCH = {'ObjLoss': 7e-5, 'BoxCenterLoss': 7e-4, 'BoxScaleLoss': 4e-3, 'ClassLoss': 7e-4}
#: ``|mean(ours) / mean(theirs) - 1|`` over batches 1-99, per loss (module docstring)
WINDOW = {'ObjLoss': 0.10, 'BoxCenterLoss': 0.16, 'BoxScaleLoss': 0.54, 'ClassLoss': 0.11}


def _reference():
    with open(FIXTURE) as f:
        return json.load(f)


def _run_torch(tmp_path, monkeypatch):
    model = get_yolov3('yolo3_{}_voc'.format(fx.NETWORK))
    arrays = gluon_arrays(model)
    init = str(tmp_path / 'init.params')
    mxparams.write_params(init, fx.initial_arrays(
        {k: v.shape for k, v in arrays.items()},
        {k: v for k, v in arrays.items() if k.endswith(('.anchors', '.offsets'))}))
    batches = []
    original = torch_step.YOLOv3Step.__call__

    def recording(self, batch, state=None):
        out = original(self, batch, state)
        # (the sums stay on the device: read here, as the log reads them at its interval)
        batches.append({'lr': out['lr'], 'losses': {
            n: sum(float(s) for s, _ in p) / sum(c for _, c in p)
            for n, p in out['losses'].items()}})
        return out

    monkeypatch.setattr(torch_step.YOLOv3Step, '__call__', recording)
    root = synthetic.write_voc(str(tmp_path / 'data'), **fx.DATA)
    out = str(tmp_path / 'out')
    state = main(fx.run_argv(root, out, init) + ['--backend', 'torch'])
    log = open(os.path.join(out, 'yolo3_{}_voc_train.log'.format(fx.NETWORK))).read()
    return batches, state.scores['val'], log.replace(str(tmp_path) + os.sep, '').splitlines()[1:]


@pytest.mark.slow
def test_100_batches_and_map_against_gluoncv(tmp_path, monkeypatch):
    ref = _reference()
    batches, (names, values), log = _run_torch(tmp_path, monkeypatch)
    assert len(batches) == len(ref['batches']) == 100
    ours = {n: np.array([b['losses'][n] for b in batches]) for n in NAMES}
    theirs = {n: np.array([b['losses'][n] for b in ref['batches']]) for n in NAMES}
    rel = {n: np.abs(ours[n] - theirs[n]) / np.abs(theirs[n]) for n in NAMES}
    print('first batch relative differences', {n: float(rel[n][0]) for n in NAMES})
    print('max relative difference per loss', {n: float(rel[n].max()) for n in NAMES})
    # the same weights and batch: the forward agrees within float32 rounding (FIRST_BATCH)
    assert all(rel[n][0] < FIRST_BATCH[n] for n in NAMES), {n: rel[n][0] for n in NAMES}
    # GluonCV's schedule, update for update
    assert np.allclose([b['lr'] for b in batches], [b['lr'] for b in ref['batches']],
                       rtol=1e-12, atol=0)
    # after the trajectories parted (float32, see the module docstring): the means over
    # batches 1-99 within the spread of float32 runs (WINDOW)
    window = {n: abs(ours[n][1:].mean() / theirs[n][1:].mean() - 1) for n in NAMES}
    print('batches 1-99 mean relative differences', window)
    for name in NAMES:
        assert window[name] < WINDOW[name], (name, window[name])
    assert names == ref['val'][0]
    # GluonCV's run scored 0.0; the ensemble 0.0000-0.0034: 0.01 is 3x the largest seen
    assert abs(values[-1] - ref['val'][1][-1]) <= 0.01, (values[-1], ref['val'][1][-1])
    # the log has GluonCV's lines, in its order (numbers aside)
    # timings masked as the fixture's generator masks them (make_yolo3_torch_training_fixture)
    keep = [re.sub(r'(Speed: |Training cost: )[\d.]+', r'\1<t>', line) for line in log
            if 'Epoch mean' not in line and not line.startswith('loaded')]
    theirs_log = [line for line in ref['log'] if 'Epoch mean' not in line and
                  not line.startswith('loaded')]
    assert [NUMBER.sub('#', line) for line in keep] == [NUMBER.sub('#', line)
                                                        for line in theirs_log]
