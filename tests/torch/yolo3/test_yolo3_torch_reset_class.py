"""YOLOV3.reset_class on PyTorch: GluonCV's rows reused, the others drawn as Gluon draws them.

GluonCV's network and ours get the same seeded weights (the model fixtures' ``.params``), the
same ``reset_class`` call for a dict of indices, a dict of names and a list of names; the rows
GluonCV keeps (each reused class and its anchors' box and objectness rows) give the same raw
prediction maps; the rows it re-initialises are Gluon's default ``Uniform(-0.07, 0.07)``
weights and zero biases, checked statistically on both sides.
"""
import importlib.util
import os

import numpy as np
import pytest
import torch

from fixtures.make_yolo3_torch_fixtures import weights_for
from gluontrain.core import mxparams
from gluontrain.torch.yolo3 import get_yolov3, load_params
from gluontrain.yolo3.transfer import rows_to_copy
from yolo3_torch_support import fill_arrays

HAS_GLUONCV = all(importlib.util.find_spec(m) is not None for m in ('mxnet', 'gluoncv'))
needs_gluoncv = pytest.mark.skipif(not HAS_GLUONCV, reason='mxnet/gluoncv not installed: the '
                                   'comparison runs GluonCV\'s reset_class')
NEW = ['person', 'car', 'zebra']
#: GluonCV's three spellings; the expected {new: old} in VOC's class order
CALLS = [({0: 14, 1: 6}, {0: 14, 1: 6}),
         ({'person': 'person', 'car': 'car'}, {0: 14, 1: 6}),
         (['person', 'zebra'], {0: 14})]
#: the issue's bound on the kept rows' raw outputs, relative to their largest value: measured
#: 9.7e-7 (mobilenet0.25) and 1.65e-6 (darknet53) here; float32 against float64 alone differs by
#: about 2e-6 on these bodies (the base test), so another processor's kernels stay within 1e-5
HEAD_TOL = 1e-5
NETWORKS = ['yolo3_mobilenet0.25_voc', 'yolo3_mobilenet1.0_voc', 'yolo3_darknet53_voc']


def _input():
    return np.random.RandomState(0).uniform(-2, 2, (1, 3, 96, 64)).astype(np.float32)


def _uniform_007(values):
    """Gluon's default weight initialiser, within 5 sigma: bounds, mean and variance."""
    values = np.asarray(values, np.float64).ravel()
    n = values.size
    assert n > 1000
    assert values.min() >= -0.07 and values.max() <= 0.07
    var = 0.07 ** 2 / 3  # of U(-a, a); the variance of a sample variance: (9/5 - 1) var^2 / n
    assert abs(values.mean()) < 5 * np.sqrt(var / n)
    assert abs(values.var() - var) < 5 * np.sqrt(0.8 * var ** 2 / n)


@pytest.fixture(scope='module')
def seeded_files(tmp_path_factory):
    """``{name: .params of the model fixtures' seeded weights}``, written once per network."""
    folder, files = str(tmp_path_factory.mktemp('reset_class')), {}

    def get(name):
        if name not in files:
            net = _gluoncv_build(name)
            params = net._collect_params_with_prefix()
            constants = {k: p.data().asnumpy() for k, p in params.items()
                         if k.endswith(('.anchors', '.offsets'))}
            files[name] = os.path.join(folder, name + '.params')
            mxparams.write_params(files[name], weights_for(
                {k: p.shape for k, p in params.items()}, constants))
        return files[name]
    return get


def _gluoncv_build(name, path=None):
    import mxnet as mx  # pylint: disable=import-outside-toplevel,import-error
    from gluontrain.mx._gluoncv import gluoncv  # pylint: disable=import-outside-toplevel
    net = gluoncv.model_zoo.get_model(name, pretrained=False, pretrained_base=False)
    net.initialize()
    net(mx.nd.zeros((1, 3, 64, 64)))
    if path:
        net.load_parameters(path)
    return net


def _gluoncv_preds(net, x):
    import mxnet as mx  # pylint: disable=import-outside-toplevel,import-error
    preds, handles = {}, []
    for i, output in enumerate(net.yolo_outputs):
        handles.append(output.prediction.register_forward_hook(
            lambda _b, _x, out, i=i: preds.__setitem__(i, out.asnumpy())))
    net(mx.nd.array(x))
    for h in handles:
        h.detach()
    return [preds[i] for i in range(len(preds))]


@needs_gluoncv
@pytest.mark.parametrize('reuse, mapping', CALLS, ids=['indices', 'names', 'list'])
@pytest.mark.parametrize('name', NETWORKS)
def test_reused_rows_equal_gluoncvs_and_the_rest_are_glouns_initialiser(name, reuse, mapping,
                                                                          seeded_files):
    import mxnet as mx  # pylint: disable=import-outside-toplevel,import-error
    path = seeded_files(name)
    gnet = _gluoncv_build(name, path)
    tnet = get_yolov3(name).eval()
    load_params(tnet, path)
    mx.random.seed(1)
    torch.manual_seed(1)
    if isinstance(reuse, list):
        with pytest.warns(UserWarning, match='zebra not found'):
            gnet.reset_class(NEW, reuse_weights=list(reuse))
        with pytest.warns(UserWarning, match='zebra not found'):
            assert tnet.reset_class(NEW, reuse_weights=list(reuse)) == mapping
    else:
        gnet.reset_class(NEW, reuse_weights=dict(reuse))
        assert tnet.reset_class(NEW, reuse_weights=dict(reuse)) == mapping
    assert gnet.classes == tnet.classes == NEW
    x = _input()
    theirs = _gluoncv_preds(gnet, x)
    with torch.no_grad():
        ours = [p.numpy() for p in tnet.predictions(torch.from_numpy(x))]
    fresh_w = []
    for out, g_out, t, g in zip(tnet.yolo_outputs, gnet.yolo_outputs, ours, theirs):
        assert t.shape == g.shape == (1, 3 * (5 + len(NEW))) + t.shape[2:]
        kept = sorted({row for row, _ in rows_to_copy(mapping, 3, 20, len(NEW))})
        scale = np.abs(g[:, kept]).max()
        np.testing.assert_allclose(t[:, kept], g[:, kept], rtol=0, atol=HEAD_TOL * scale)
        others = [r for r in range(t.shape[1]) if r not in kept]
        assert not np.allclose(t[:, others], g[:, others])  # drawn afresh on each side
        g_w = g_out.prediction.weight.data().asnumpy()
        g_b = g_out.prediction.bias.data().asnumpy()
        assert np.all(g_b[others] == 0) and np.all(out.prediction.bias.detach().numpy()[others] == 0)
        fresh_w.append((out.prediction.weight.detach().numpy()[others].ravel(),
                        g_w[others].ravel()))
    for side in (0, 1):  # ours, then GluonCV's: the same distribution
        _uniform_007(np.concatenate([w[side] for w in fresh_w]))


def test_without_a_mapping_gluoncv_reinitialises_box_rows_keep_box_rows_keeps_them():
    net = get_yolov3('yolo3_mobilenet0.25_voc')
    old = [o.prediction.weight.detach().clone() for o in net.yolo_outputs]
    torch.manual_seed(0)
    assert net.reset_class(['a', 'b']) is None
    for o, w in zip(net.yolo_outputs, old):
        assert not torch.equal(o.prediction.weight[:5], w[:5])
    net = get_yolov3('yolo3_mobilenet0.25_voc')
    old = [(o.prediction.weight.detach().clone(), o.prediction.bias.detach().clone())
           for o in net.yolo_outputs]
    net.reset_class(['a', 'b'], keep_box_rows=True)
    for o, (w, b) in zip(net.yolo_outputs, old):
        for anchor in range(3):
            new, before = slice(anchor * 7, anchor * 7 + 5), slice(anchor * 25, anchor * 25 + 5)
            assert torch.equal(o.prediction.weight[new], w[before])
            assert torch.equal(o.prediction.bias[new], b[before])
        assert o.num_class == 2 and o.prediction.out_channels == 21


def test_the_reset_network_trains_and_saves_its_new_classes(tmp_path):
    from gluontrain.torch.yolo3.weights import save_params  # noqa: E501  pylint: disable=import-outside-toplevel
    net = get_yolov3('yolo3_mobilenet0.25_voc')
    load_params(net, _params_of(net, tmp_path))
    net.reset_class(['dog', 'x'], reuse_weights={'dog': 'dog'})
    path = str(tmp_path / 'two.params')
    save_params(net, path)
    again = get_yolov3('yolo3_mobilenet0.25_custom', ['dog', 'x'])
    report = load_params(again, path)
    assert not report.missing and not report.unexpected
    x = torch.from_numpy(_input())
    with torch.no_grad():
        for a, b in zip(net.eval().predictions(x), again.eval().predictions(x)):
            assert torch.equal(a, b)
    net.train()
    out = net(x)
    assert out.class_pred.shape[-1] == 2


def _params_of(net, tmp_path):
    path = str(tmp_path / 'seeded.params')
    mxparams.write_params(path, fill_arrays(net))
    return path
