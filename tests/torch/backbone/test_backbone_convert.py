"""Body key layouts (seamseg, maskrcnn-benchmark, torchvision) and loading a body's weights
with a report."""
import logging

import pytest
import torch

from gluontrain.core.load_report import WeightsLoadError
from gluontrain.torch.backbone import (ARCHITECTURES, body_key_scheme, load_body_weights,
                                       make_resnet, rename_body_keys)


def _torchvision_keys(structure, bottleneck):
    """torchvision resnet state_dict keys, written from its naming (conv1/bn1, layerL.b.convk,
    layerL.b.bnk, layerL.b.downsample.{0,1}, fc)."""
    bn = ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
    keys = ['conv1.weight'] + ['bn1.' + s for s in bn]
    convs = 3 if bottleneck else 2
    for layer, num in enumerate(structure, 1):
        for b in range(num):
            for k in range(1, convs + 1):
                keys.append('layer{}.{}.conv{}.weight'.format(layer, b, k))
                keys += ['layer{}.{}.bn{}.{}'.format(layer, b, k, s) for s in bn]
            if b == 0 and (bottleneck or layer > 1):
                keys.append('layer{}.{}.downsample.0.weight'.format(layer, b))
                keys += ['layer{}.{}.downsample.1.{}'.format(layer, b, s) for s in bn]
    return keys + ['fc.weight', 'fc.bias']


def test_hand_written_renames():
    pairs = [('conv1.weight', 'mod1.conv1.weight', 'stem.conv1.weight'),
             ('bn1.running_var', 'mod1.bn1.running_var', 'stem.bn1.running_var'),
             ('layer4.1.conv2.weight', 'mod5.block2.convs.conv2.weight', 'layer4.1.conv2.weight'),
             ('layer1.0.downsample.1.bias', 'mod2.block1.proj_bn.bias',
              'layer1.0.downsample.1.bias')]
    for tv, seamseg, maskrcnn in pairs:
        assert list(rename_body_keys({tv: 0}, 'seamseg', 'torchvision')) == [seamseg]
        assert list(rename_body_keys({tv: 0}, 'maskrcnn', 'torchvision')) == [maskrcnn]
        assert list(rename_body_keys({seamseg: 0}, 'maskrcnn', 'seamseg')) == [maskrcnn]
        assert list(rename_body_keys({maskrcnn: 0}, 'seamseg', 'maskrcnn')) == [seamseg]
    assert body_key_scheme(['mod1.conv1.weight']) == 'seamseg'
    assert body_key_scheme(['stem.conv1.weight']) == 'maskrcnn'
    assert body_key_scheme(['conv1.weight', 'fc.bias']) == 'torchvision'
    assert body_key_scheme(['vgg.0.weight']) is None


@pytest.mark.parametrize('depth', [18, 50])
@pytest.mark.parametrize('naming', ['seamseg', 'maskrcnn'])
def test_torchvision_file_loads_every_tensor_in_place(depth, naming, tmp_path, caplog):
    body = make_resnet(depth, naming=naming)
    own = body.state_dict()
    keys = _torchvision_keys(*ARCHITECTURES[depth])
    tv = {}
    for i, k in enumerate(keys):
        if k.startswith('fc.'):
            tv[k] = torch.zeros(1000, 2048 if depth == 50 else 512) if k == 'fc.weight' \
                else torch.zeros(1000)
            continue
        tv[k] = torch.full_like(own[next(iter(rename_body_keys({k: 0}, naming,
                                                               'torchvision')))], i)
    path = tmp_path / 'tv.pth'
    torch.save(tv, path)
    with caplog.at_level(logging.INFO):
        report = load_body_weights(body, str(path))
    assert len(report.loaded) == report.total == len(own) and not report.missing
    assert 'loaded {} of {} tensors'.format(len(own), len(own)) in caplog.text
    loaded = body.state_dict()
    for i, k in enumerate(keys):
        if not k.startswith('fc.'):
            new = next(iter(rename_body_keys({k: 0}, naming, 'torchvision')))
            assert int(loaded[new].flatten()[0]) == i, k


def test_detector_checkpoint_body_and_the_other_naming(tmp_path):
    """A maskrcnn-benchmark detector's ``backbone.body.*`` tensors fill a seamseg-named body."""
    src = make_resnet(18, naming='maskrcnn', width_mult=0.25)
    state = {'backbone.body.' + k: v for k, v in src.state_dict().items()}
    path = tmp_path / 'det.pth'
    torch.save({'model': state, 'iteration': 3}, path)
    dst = make_resnet(18, naming='seamseg', width_mult=0.25)
    report = load_body_weights(dst, str(path))
    assert report.complete and len(report.loaded) == report.total
    x = torch.randn(1, 3, 32, 32)
    src.eval(), dst.eval()
    with torch.no_grad():
        assert torch.equal(src(x)['layer4'], dst(x)['mod5'])


def test_errors_are_one_line(tmp_path):
    body = make_resnet(18, naming='seamseg', width_mult=0.5)
    with pytest.raises(FileNotFoundError, match='weights'):
        load_body_weights(body, str(tmp_path / 'none.pth'))
    path = tmp_path / 'full.pth'
    torch.save(make_resnet(18, naming='seamseg').state_dict(), path)
    with pytest.raises(WeightsLoadError,
                       match=r'wrong shape .mod1.conv1.weight. \(\(64, 3, 7, 7\) in the file'):
        load_body_weights(body, str(path))
    renamed = {'x.' + k: v for k, v in body.state_dict().items()}
    torch.save(renamed, path)
    with pytest.raises(WeightsLoadError, match=r'full.pth: loaded 0 of 100 tensors') as err:
        load_body_weights(body, str(path))
    assert '\n' not in str(err.value)
    deeper = make_resnet(34, naming='seamseg', width_mult=0.5).state_dict()
    torch.save(deeper, path)
    with pytest.raises(WeightsLoadError, match='unexpected'):
        load_body_weights(body, str(path))
