"""The detector assembled from the configuration: freezing, shapes, config checks."""
import pytest
import torch

from gluontrain.torch.frcnn.config import load_config
from gluontrain.torch.frcnn.model import make_model
from gluontrain.torch.twostage.seamseg import prepare_inputs
from gluontrain.torch.twostage.norm import NORM_LAYERS


def _small_config(tmp_path, extra=''):
    p = tmp_path / 'small.ini'
    p.write_text('[body]\nbody = resnet18\nbody_params = {"width_mult": 0.25}\n'
                 'normalization_mode = bn\n'
                 'out_channels = {"mod1": 16, "mod2": 16, "mod3": 32, "mod4": 64, "mod5": 128}\n'
                 '[fpn]\nout_channels = 16\n[rpn]\nhidden_channels = 16\n' + extra)
    return load_config(str(p))


def test_default_model_is_seamseg_resnet50(tmp_path):
    model = make_model(load_config(None), num_thing=10)
    n = {k: sum(p.numel() for p in getattr(model, k).parameters())
         for k in ('body', 'rpn_head', 'roi_head')}
    assert n == {'body': 23508032 + 3346432, 'rpn_head': 594191, 'roi_head': 13950003}
    frozen = {name.split('.')[1] for name, p in model.body.named_parameters()
              if not p.requires_grad}
    assert frozen == {'mod1', 'mod2'}
    assert all(p.requires_grad for p in model.body.backbone.mod3.parameters())


def test_forward_raw_outputs(tmp_path):
    model = make_model(_small_config(tmp_path), num_thing=3).train()
    out = model.head_outputs([torch.randn(3, 64, 96), torch.randn(3, 48, 80)])
    assert out['valid_size'] == [(64, 96), (48, 80)] and out['img_size'] == (64, 96)
    assert [tuple(f.shape) for f in out['features']] == [
        (2, 16, 16, 24), (2, 16, 8, 12), (2, 16, 4, 6), (2, 16, 2, 3)]
    anchors = 3 * (16 * 24 + 8 * 12 + 4 * 6 + 2 * 3)
    assert out['obj_logits'].shape == (2, anchors) and out['bbx_logits'].shape == (2, anchors, 4)
    out['obj_logits'].sum().backward()
    assert model.body.backbone.mod1.conv1.weight.grad is None  # frozen
    assert model.body.backbone.mod3.block1.convs.conv1.weight.grad is not None


def test_frozen_modules_keep_batchnorm_in_train_mode(tmp_path):
    model = make_model(_small_config(tmp_path), num_thing=2).train()
    bn = model.body.backbone.mod1.bn1
    assert not bn.weight.requires_grad and bn.training
    before = bn.running_mean.clone()
    model.head_outputs(torch.randn(2, 3, 32, 32))
    assert not torch.equal(before, bn.running_mean)  # seamseg: running stats still move


def test_out_channels_mismatch_is_a_clear_error(tmp_path):
    p = tmp_path / 'bad.ini'
    p.write_text('[body]\nbody = resnet18\n')
    with pytest.raises(ValueError, match='out_channels'):
        make_model(load_config(str(p)), num_thing=2)


def test_every_trainable_parameter_is_norm_or_conv_linear(tmp_path):
    model = make_model(_small_config(tmp_path, '[roi]\nroi_size = (8, 8)\n'), num_thing=2)
    assert model.roi_head.fc.fc1.in_features == 8 * 8 * 16 // 4
    norm = sum(p.numel() for m in model.modules() if isinstance(m, NORM_LAYERS)
               for p in m.parameters(recurse=False))
    total = sum(p.numel() for p in model.parameters())
    other = sum(p.numel() for m in model.modules()
                if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))
                for p in m.parameters(recurse=False))
    assert norm + other == total


def test_prepare_inputs_splits_things_crowds_and_void():
    # instance: void, stuff, thing, crowd thing, crowd stuff
    cat = torch.tensor([255, 0, 2, 3, 1])
    crowd = torch.tensor([0, 0, 0, 1, 1], dtype=torch.uint8)
    bbx = torch.arange(20.).view(5, 4)
    cats, crowds, boxes = prepare_inputs([cat, cat[:2]], [crowd, crowd[:2]],
                                         [bbx, bbx[:2]], num_stuff=2)
    assert cats[0].tolist() == [2] and boxes[0].tolist() == [[8., 9., 10., 11.]]
    assert crowds[0].tolist() == [[12., 13., 14., 15.]]
    assert cats[1] is None and boxes[1] is None and crowds[1] is None
    only_stuff_crowd = prepare_inputs([torch.tensor([1, 2])], [torch.tensor([1, 0])],
                                      [bbx[:2]], num_stuff=2)
    assert only_stuff_crowd[1] == [None]  # seamseg: an empty (0, 4) tensor
