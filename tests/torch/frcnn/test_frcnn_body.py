"""seamseg's ``[body] body`` names on the shared ResNet: seamseg's module names, strides and
activations (the network itself is tested in tests/torch/backbone)."""
import pytest
import torch

from gluontrain.torch.frcnn import body as B


@pytest.mark.parametrize('name, known', [
    # torchvision's totals (25,557,032 / 11,689,512 / 21,797,672) minus the 1000-way fc
    ('resnet50', 23508032), ('resnet18', 11176512), ('resnet34', 21284672)])
def test_parameter_counts(name, known):
    body = B.make_body(name)
    assert sum(p.numel() for p in body.parameters()) == known


def test_width_mult_channels_and_strides():
    body = B.make_body('resnet18', width_mult=0.125).eval()
    outs = body(torch.zeros(2, 3, 64, 96))
    assert list(outs) == ['mod1', 'mod2', 'mod3', 'mod4', 'mod5']
    assert [tuple(v.shape) for v in outs.values()] == [
        (2, 8, 16, 24), (2, 8, 16, 24), (2, 16, 8, 12), (2, 32, 4, 6), (2, 64, 2, 3)]
    assert dict(B.make_body('resnet50').out_channels) == {
        'mod1': 64, 'mod2': 256, 'mod3': 512, 'mod4': 1024, 'mod5': 2048}


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


def test_dilation_drops_the_pool_and_keeps_the_stride():
    body = B.make_body('resnet18', width_mult=0.125, dilation=(1, 1, 1, 2))
    assert body.mod5.block1.convs.conv1.stride == (1, 1)
    assert body.mod5.block1.convs.conv1.dilation == (2, 2)
    assert not hasattr(B.make_body('resnet18', dilation=(2, 1, 1, 1)).mod1, 'pool1')


def test_bad_names():
    with pytest.raises(ValueError, match='body_params'):
        B.make_body('resnet18', classes=10)
    with pytest.raises(ValueError, match='resnet51'):
        B.make_body('resnet51')
