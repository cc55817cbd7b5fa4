"""get_net: names, the offline pretrained-base message, SyncBatchNorm + async_net."""
import mxnet as mx
import pytest
from mxnet import gluon

from gluontrain.mx.yolo3 import get_net, net_name, parse_args
from gluontrain.mx.yolo3.model import pretrained_base_path


def _blocks(block, kind):
    found = [block] if isinstance(block, kind) else []
    for child in block._children.values():
        found += _blocks(child, kind)
    return found


def test_net_names():
    assert net_name(parse_args(['--network', 'mobilenet0.25'])) == 'yolo3_mobilenet0.25_voc'
    assert net_name(parse_args(['--dataset', 'coco'])) == 'yolo3_darknet53_coco'
    assert net_name(parse_args(['--dataset', 'synthetic'])) == 'yolo3_darknet53_custom'


def test_missing_pretrained_base_says_where_to_put_it(tmp_path, monkeypatch):
    monkeypatch.setenv('MXNET_HOME', str(tmp_path))
    args = parse_args(['--network', 'mobilenet0.25'])
    path = pretrained_base_path('mobilenet0.25')
    assert path.startswith(str(tmp_path / 'models' / 'mobilenet0.25-')) and path.endswith('.params')
    with pytest.raises(FileNotFoundError) as e:
        get_net(args, [mx.cpu()])
    assert path in str(e.value) and '--no-pretrained-base' in str(e.value)


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
