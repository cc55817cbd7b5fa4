"""ResNet body: seamseg's names, shapes, parameter counts, torchvision weight mapping."""
import pytest
import torch

from gluontrain.torch.frcnn import body as B
from gluontrain.torch.frcnn.norm import BatchNormAct


def _bn(c):
    return 2 * c


def _hand_count(structure, bottleneck, w=1.0):
    """Parameter count written out block by block (convs have no bias; BN: scale + shift)."""
    def width(c):
        return max(1, int(round(c * w)))
    stem = width(64)
    total = 3 * stem * 7 * 7 + _bn(stem)
    cin = stem
    for m, num in enumerate(structure):
        for b in range(num):
            stride = 2 if b == 0 and m > 0 else 1
            if bottleneck:
                c, out = width(64 * 2 ** m), width(256 * 2 ** m)
                total += cin * c + _bn(c) + c * c * 9 + _bn(c) + c * out + _bn(out)
            else:
                c = out = width(64 * 2 ** m)
                total += cin * c * 9 + _bn(c) + c * c * 9 + _bn(c)
            if stride != 1 or cin != out:
                total += cin * out + _bn(out)
            cin = out
    return total


@pytest.mark.parametrize('name, known', [
    # torchvision's totals (25,557,032 / 11,689,512 / 21,797,672) minus the 1000-way fc
    ('resnet50', 23508032), ('resnet18', 11176512), ('resnet34', 21284672)])
def test_parameter_counts(name, known):
    body = B.make_body(name)
    n = sum(p.numel() for p in body.parameters())
    assert n == known == _hand_count(**B.NETS[name])


def test_width_mult_count_and_channels():
    body = B.make_body('resnet18', width_mult=0.25)
    assert sum(p.numel() for p in body.parameters()) == _hand_count((2, 2, 2, 2), False, 0.25)
    assert dict(body.out_channels) == {'mod1': 16, 'mod2': 16, 'mod3': 32, 'mod4': 64,
                                       'mod5': 128}
    assert B.body_out_channels('resnet50') == {'mod1': 64, 'mod2': 256, 'mod3': 512,
                                               'mod4': 1024, 'mod5': 2048}


def test_output_shapes_and_strides():
    body = B.make_body('resnet18', width_mult=0.125).eval()
    outs = body(torch.zeros(2, 3, 64, 96))
    assert list(outs) == ['mod1', 'mod2', 'mod3', 'mod4', 'mod5']
    assert [tuple(v.shape) for v in outs.values()] == [
        (2, 8, 16, 24), (2, 8, 16, 24), (2, 16, 8, 12), (2, 32, 4, 6), (2, 64, 2, 3)]


def test_seamseg_module_names_and_identity_activations():
    body = B.make_body('resnet50')
    names = dict(body.named_modules())
    for n in ('mod1.conv1', 'mod1.bn1', 'mod1.pool1', 'mod2.block1.convs.conv3',
              'mod2.block1.proj_conv', 'mod2.block1.proj_bn', 'mod5.block3.convs.bn3'):
        assert n in names
    assert 'mod2.block2.proj_conv' not in names
    blk = body.mod3.block1
    assert blk.convs.conv2.stride == (2, 2) and blk.convs.conv1.stride == (1, 1)
    assert blk.proj_conv.stride == (2, 2)
    assert blk.convs.bn3.activation == 'identity' and blk.proj_bn.activation == 'identity'
    assert blk.convs.bn1.activation == 'leaky_relu' and blk.convs.bn1.activation_param == 0.01


def test_block_activation_after_sum():
    blk = B.ResidualBlock(4, (4, 4), norm_act=BatchNormAct).eval()
    x = torch.randn(1, 4, 5, 5)
    expected = torch.nn.functional.leaky_relu(
        blk.convs.bn2(blk.convs.conv2(blk.convs.bn1(blk.convs.conv1(x)))) + x, 0.01)
    assert torch.allclose(blk(x), expected)


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


@pytest.mark.parametrize('name', ['resnet18', 'resnet50'])
def test_torchvision_mapping_loads_every_tensor_in_place(name, tmp_path):
    body = B.make_body(name)
    own = body.state_dict()
    keys = _torchvision_keys(**B.NETS[name])
    mapped_names = [k for k in keys if not k.startswith('fc.')]
    assert len(mapped_names) == len(own)
    # A torchvision-layout state_dict whose i-th tensor is filled with i.
    tv = {}
    own_by_tv = {}
    for i, k in enumerate(keys):
        if k.startswith('fc.'):
            tv[k] = torch.zeros(1000, 2048 if name == 'resnet50' else 512) \
                if k == 'fc.weight' else torch.zeros(1000)
            continue
        new = B.torchvision_to_seamseg({k: None}).popitem()[0]
        own_by_tv[k] = new
        tv[k] = torch.full_like(own[new], i)
    mapped = B.torchvision_to_seamseg(tv)
    assert set(mapped) == set(own)
    proj = 'layer1.0' if name == 'resnet50' else 'layer2.0'  # basic blocks: no mod2 projection
    assert own_by_tv[proj + '.downsample.1.running_var'] == \
        'mod{}.block1.proj_bn.running_var'.format(int(proj[5]) + 1)
    assert own_by_tv['layer4.1.conv2.weight'] == 'mod5.block2.convs.conv2.weight'
    assert own_by_tv['bn1.bias'] == 'mod1.bn1.bias'
    path = tmp_path / 'tv.pth'
    torch.save(tv, path)
    B.load_body_weights(body, str(path))
    loaded = body.state_dict()
    for i, k in enumerate(keys):
        if not k.startswith('fc.'):
            assert int(loaded[own_by_tv[k]].flatten()[0]) == i, k


def test_weights_errors(tmp_path):
    body = B.make_body('resnet18', width_mult=0.5)
    with pytest.raises(FileNotFoundError, match='weights'):
        B.load_body_weights(body, str(tmp_path / 'none.pth'))
    path = tmp_path / 'full.pth'
    torch.save(B.make_body('resnet18').state_dict(), path)
    with pytest.raises(ValueError, match='wrong shape'):
        B.load_body_weights(body, str(path))
    with pytest.raises(ValueError, match='unexpected key'):
        B.torchvision_to_seamseg({'layer9.x': torch.zeros(1)})
    with pytest.raises(ValueError, match='body_params'):
        B.make_body('resnet18', classes=10)
    with pytest.raises(ValueError, match='resnet51'):
        B.make_body('resnet51')
