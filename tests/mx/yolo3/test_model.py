"""get_net: names, the pretrained base (offline message, report), SyncBatchNorm + async_net."""
import os
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

from gluontrain.mx.yolo3 import get_net, net_name, parse_args
from gluontrain.mx.yolo3.model import model_store_path
from gluontrain.mx._gluoncv import gluoncv

get_model = gluoncv.model_zoo.get_model


def _blocks(block, kind):
    found = [block] if isinstance(block, kind) else []
    for child in block._children.values():
        found += _blocks(child, kind)
    return found


def test_net_names():
    assert net_name(parse_args(['--network', 'mobilenet0.25'])) == 'yolo3_mobilenet0.25_voc'
    assert net_name(parse_args(['--dataset', 'coco'])) == 'yolo3_darknet53_coco'
    assert net_name(parse_args(['--dataset', 'synthetic'])) == 'yolo3_darknet53_custom'


def test_missing_pretrained_base_is_fetched_or_says_where_to_put_it(tmp_path, monkeypatch):
    # the store's address points at a closed loopback port: the download fails at once
    # (tests/core/test_model_store.py downloads from a local server)
    monkeypatch.setenv('MXNET_HOME', str(tmp_path))
    monkeypatch.setenv('MXNET_GLUON_REPO', 'http://127.0.0.1:9/')
    args = parse_args(['--network', 'mobilenet0.25'])
    path = model_store_path('mobilenet0.25')
    assert path.startswith(str(tmp_path / 'models' / 'mobilenet0.25-')) and path.endswith('.params')
    with pytest.raises(ValueError) as e:
        get_net(args, [mx.cpu()])
    for part in (path, '--no-pretrained-base', 'http://127.0.0.1:9/gluon/models/mobilenet0.25-',
                 'f0046a3da4e150b85da58ea31913dbb86e7540d1'):
        assert part in str(e.value)


def test_syncbn_net_has_num_devices_and_a_plain_async_net():
    args = parse_args(['--network', 'mobilenet0.25', '--syncbn', '--no-pretrained-base'])
    ctx = [mx.cpu(0), mx.cpu(1)]
    net, async_net = get_net(args, ctx)
    sync = _blocks(net, gluon.contrib.nn.SyncBatchNorm)
    assert sync and all(b._kwargs['ndev'] == 2 for b in sync)
    assert async_net is not net
    assert not _blocks(async_net, gluon.contrib.nn.SyncBatchNorm)
    plain = [b for b in _blocks(async_net, gluon.nn.BatchNorm)
             if not isinstance(b, gluon.contrib.nn.SyncBatchNorm)]
    assert len(plain) == len(sync)
    shapes = lambda n: [p.shape for p in n.collect_params().values()]  # noqa: E731
    assert shapes(net) == shapes(async_net)
    # the async net drives the transforms: it runs on CPU in inference mode
    ids, scores, boxes = async_net(mx.nd.zeros((1, 3, 128, 128)))
    assert ids.shape == (1, 100, 1) and boxes.shape == (1, 100, 4)


def test_one_context_syncbn_is_plain_batchnorm_as_the_reference():
    args = parse_args(['--network', 'mobilenet0.25', '--syncbn', '--no-pretrained-base'])
    net, async_net = get_net(args, [mx.cpu()])
    assert async_net is net and not _blocks(net, gluon.contrib.nn.SyncBatchNorm)


def _store_base(tmp_path, monkeypatch, network, seed=3):
    """A base network's ImageNet-layout weights where gluoncv's model store keeps the
    released file (seeded; not the released file: its SHA-1 differs)."""
    from gluontrain.mx._gluoncv import gluoncv  # pylint: disable=import-outside-toplevel
    monkeypatch.setenv('MXNET_HOME', str(tmp_path))
    mx.random.seed(seed)
    base = gluoncv.model_zoo.get_model(network, pretrained=False)
    base.initialize()
    base(mx.nd.zeros((1, 3, 64, 64)))
    path = model_store_path(network)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    base.save_parameters(path)
    return path


def _assert_same_net(net, outputs, other, other_outputs):
    """Every parameter of ``net`` and ``other`` and their outputs on one input: bit for bit."""
    refs = other._collect_params_with_prefix()
    for key, param in net._collect_params_with_prefix().items():
        np.testing.assert_array_equal(param.data().asnumpy(), refs[key].data().asnumpy(), key)
    for a, b in zip(outputs, other_outputs):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_pretrained_base_loads_with_a_report_and_equals_gluoncvs_own(tmp_path, monkeypatch):
    from gluontrain.mx._gluoncv import gluoncv  # pylint: disable=import-outside-toplevel
    path = _store_base(tmp_path, monkeypatch, 'mobilenet0.25')
    args = parse_args(['--network', 'mobilenet0.25'])
    lines = []
    x = mx.nd.random.uniform(-1, 1, (1, 3, 64, 64))
    # deferred initialisation draws at the first forward: seed, build, run (both nets)
    mx.random.seed(7)
    net, _ = get_net(args, [mx.cpu()], lines)
    ours = net(x)
    stage_keys = [k for k in net._collect_params_with_prefix() if k.startswith('stages.')]
    assert lines[0].splitlines()[0] == (
        'pretrained base: loaded {0} of {0} tensors from {1} (0 missing, 2 unexpected, 0 wrong '
        'shape)'.format(len(stage_keys), path))
    # the ImageNet classifier is what the detector leaves out, as gluoncv's slicing does
    assert lines[0].splitlines()[1:] == ['The checkpoint contains parameters not used by the '
                                         'model:', '  output.{bias, weight}']
    assert lines[1].startswith('note: {} is not the model store\'s mobilenet0.25'.format(path))
    # gluoncv's own pretrained_base=True path, given the same file (it would check the SHA-1
    # and download the released one), from the same seed
    monkeypatch.setattr(gluoncv.model_zoo.model_store, 'get_model_file',
                        lambda name, tag=None, root=None: path)
    mx.random.seed(7)
    ref = gluoncv.model_zoo.get_model('yolo3_mobilenet0.25_voc', pretrained_base=True)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        ref.initialize()
    _assert_same_net(net, ours, ref, ref(x))


def test_pretrained_base_file_equals_the_same_file_in_the_model_store(tmp_path, monkeypatch):
    """--pretrained-base FILE is the model store's path of loading, from FILE: the same weights
    and forward as the file put where the store keeps the base (same seed), and one log line
    (no SHA-1 note: the file is the user's own choice)."""
    path = _store_base(tmp_path, monkeypatch, 'mobilenet0.25')
    given = str(tmp_path / 'my_base.params')
    os.replace(path, given)
    x = mx.nd.random.uniform(-1, 1, (1, 3, 64, 64))
    lines = []
    mx.random.seed(7)
    net, _ = get_net(parse_args(['--network', 'mobilenet0.25', '--pretrained-base', given]),
                     [mx.cpu()], lines)
    ours = net(x)
    assert [line.splitlines()[0] for line in lines] == [
        'pretrained base: loaded 135 of 135 tensors from {} (0 missing, 2 unexpected, 0 wrong '
        'shape)'.format(given)]
    os.replace(given, path)
    mx.random.seed(7)
    store, _ = get_net(parse_args(['--network', 'mobilenet0.25']), [mx.cpu()])
    _assert_same_net(net, ours, store, store(x))


def test_pretrained_base_of_another_width_is_one_error_line(tmp_path, monkeypatch):
    path = _store_base(tmp_path, monkeypatch, 'mobilenet0.25')
    other = _store_base(tmp_path / 'other', monkeypatch, 'mobilenet1.0')
    monkeypatch.setenv('MXNET_HOME', str(tmp_path))
    os.replace(other, path)
    with pytest.raises(ValueError) as e:
        get_net(parse_args(['--network', 'mobilenet0.25']), [mx.cpu()])
    line = str(e.value)
    assert line.startswith('the pretrained base of --network mobilenet0.25 {}: loaded 0 of '
                           .format(path))
    assert "another shape ('stages.0.0.weight': (32, 3, 3, 3) in the file, (8, 3, 3, 3) in the " \
        'model)' in line and line.endswith('or pass --no-pretrained-base') and '\n' not in line


def _other_params(tmp_path, classes):
    """A seeded .params of a mobilenet0.25 YOLOv3 trained, say, on ``classes``."""
    mx.random.seed(3)
    other = get_model('yolo3_mobilenet0.25_custom', classes=classes, pretrained_base=False)
    other.initialize()
    other(mx.nd.zeros((1, 3, 64, 64)))
    path = str(tmp_path / 'other.params')
    other.save_parameters(path)
    return other, path


@pytest.mark.parametrize('extra, reused', [([], {14: 1}), (['--keep-box-rows', '--classes',
                                                              'a,b'], {})])
def test_transfer_is_gluoncvs_reset_class_with_a_report(tmp_path, extra, reused):
    """--transfer: the file loads into its own classes' network, GluonCV's reset_class keeps
    the class rows both lists name (their anchors' box rows with them); --keep-box-rows keeps
    the box rows where nothing is reused."""
    other, path = _other_params(tmp_path, ['x', 'person', 'dog'])
    dataset = ['--dataset', 'custom' if extra else 'voc']
    args = parse_args(['--network', 'mobilenet0.25', '--gpus', '', '--transfer', path,
                       '--transfer-classes', 'x,person,dog'] + dataset + extra)
    reports = []
    net, async_net = get_net(args, [mx.cpu()], reports)
    assert net is async_net and reports[0].startswith('loaded 247 of 247 tensors from ' + path)
    new = ['a', 'b'] if extra else list(net.classes)
    assert list(net.classes) == new and len(new) == (2 if extra else 20)
    assert reports[1].startswith('reset_class: {} classes'.format(len(new)))
    for out, old in zip(net.yolo_outputs, other.yolo_outputs):
        w_new = out.prediction.weight.data().asnumpy()
        w_old = old.prediction.weight.data().asnumpy()
        assert w_new.shape[0] == 3 * (5 + len(new))
        for anchor in range(3):
            n0, o0 = anchor * (5 + len(new)), anchor * 8
            assert np.array_equal(w_new[n0:n0 + 5], w_old[o0:o0 + 5])  # box rows kept
            for k, v in reused.items():
                assert np.array_equal(w_new[n0 + 5 + k], w_old[o0 + 5 + v])


CUSTOM_ANCHORS = '4,6,8,12,16,10;12,24,24,16,24,40;40,30,48,56,64,60'


def test_anchors_build_gluoncvs_own_network_and_feed_the_targets():
    # pylint: disable=import-outside-toplevel
    from gluoncv.data.transforms.presets.yolo import YOLO3DefaultTrainTransform
    from gluontrain.mx.yolo3.model import build_yolov3
    from gluontrain.mx.yolo3.weights import net_anchors
    from gluontrain.yolo3.anchors import GLUONCV_ANCHORS_TEXT, anchors_text
    # GluonCV's anchors: get_model itself; others: GluonCV's custom_yolov3, which builds the
    # same network (parameter for parameter, the same draws) with its anchors argument
    x = mx.nd.random.uniform(shape=(1, 3, 64, 64), ctx=mx.cpu())
    nets = []
    for anchors in (None, GLUONCV_ANCHORS_TEXT, CUSTOM_ANCHORS):
        mx.random.seed(3)
        net = build_yolov3('yolo3_mobilenet0.25_voc', anchors)
        net.initialize()
        nets.append((net, net(x)))
    (a, out_a), (b, out_b), (c, out_c) = nets
    params = [n._collect_params_with_prefix() for n, _ in nets]
    assert list(params[0]) == list(params[1]) == list(params[2]) and len(params[0]) == 247
    for key in params[0]:
        if not key.endswith('.anchors'):
            assert np.array_equal(params[0][key].data().asnumpy(), params[2][key].data().asnumpy())
    assert all(np.array_equal(u.asnumpy(), v.asnumpy()) for u, v in zip(out_a, out_b))
    assert not np.array_equal(out_a[2].asnumpy(), out_c[2].asnumpy())  # boxes
    assert net_anchors(a) == net_anchors(b) == GLUONCV_ANCHORS_TEXT
    assert net_anchors(c) == CUSTOM_ANCHORS and c.classes == a.classes
    # the train transform reads them from the network (deep head first)
    transform = YOLO3DefaultTrainTransform(64, 64, c)
    assert anchors_text([t.asnumpy() for t in transform._anchors][::-1]) == CUSTOM_ANCHORS
    # get_net builds both networks (SyncBN's async_net too) with --anchors
    args = parse_args(['--network', 'mobilenet0.25', '--no-pretrained-base', '--syncbn',
                       '--anchors', CUSTOM_ANCHORS, '--dataset', 'custom', '--classes', 'a,b'])
    net, async_net = get_net(args, [mx.cpu(0), mx.cpu(1)])
    assert net is not async_net and net_anchors(net) == net_anchors(async_net) == CUSTOM_ANCHORS
    assert list(net.classes) == ['a', 'b']


def test_pretrain_script_keeps_the_detectors_base_in_the_imagenet_layout(tmp_path):
    """scripts/pretrain_shapes_base.py's extraction: a trained detector's stage tensors, saved
    under the ImageNet base's names, load back through --pretrained-base into every stage of a
    fresh detector unchanged (the file README job (a) starts from is made this way)."""
    import importlib.util  # pylint: disable=import-outside-toplevel
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))), 'scripts', 'pretrain_shapes_base.py')
    spec = importlib.util.spec_from_file_location('pretrain_shapes_base', script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    mx.random.seed(5)
    trained = get_model('yolo3_mobilenet0.25_voc', pretrained_base=False)
    trained.initialize()
    trained(mx.nd.zeros((1, 3, 64, 64)))
    detector = str(tmp_path / 'detector.params')
    trained.save_parameters(detector)
    base = str(tmp_path / 'base.params')
    assert module.extract_base(detector, base) == 135
    assert sorted(mx.nd.load(base))[:2] == ['features.0.weight', 'features.1.beta']
    lines = []
    net, _ = get_net(parse_args(['--network', 'mobilenet0.25', '--dataset', 'synthetic',
                                 '--classes', 'car,dog', '--pretrained-base', base]),
                     [mx.cpu()], lines)
    assert lines == ['pretrained base: loaded 135 of 135 tensors from {} (0 missing, 0 '
                     'unexpected, 0 wrong shape)'.format(base)]
    want = trained._collect_params_with_prefix()
    got = net._collect_params_with_prefix()
    stages = [k for k in got if k.startswith('stages.')]
    assert len(stages) == 135
    for key in stages:
        np.testing.assert_array_equal(got[key].data().asnumpy(), want[key].data().asnumpy(), key)
