"""SSD300 network: ssd.pytorch's state_dict layout, parameter count, outputs and weight loading."""
import collections
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from gluontrain.core.load_report import WeightsLoadError
from gluontrain.torch.ssd import model as M

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures')
sys.path.insert(0, FIXTURES)
# pylint: disable=wrong-import-position
from make_ssd_fixtures import OUT_NAME, summarize  # noqa: E402
from reference_fill import fill_state, fixed_input, load_key_list  # noqa: E402

torch.set_num_threads(1)

# ssd.pytorch's layer lists, written out by hand here (not taken from the module under test)
REF_BASE = [64, 64, 'M', 128, 128, 'M', 256, 256, 256, 'C', 512, 512, 512, 'M',
            512, 512, 512]
REF_MBOX = [4, 6, 6, 6, 4, 4]


def reference_keys_and_shapes(num_classes=21):
    """(key, shape) in the order ssd.pytorch's SSD registers them, from its layer lists."""
    out = []
    idx, cin = 0, 3
    for v in REF_BASE:
        if v in ('M', 'C'):
            idx += 1
            continue
        out += [('vgg.%d.weight' % idx, (v, cin, 3, 3)), ('vgg.%d.bias' % idx, (v,))]
        idx += 2  # conv + ReLU
        cin = v
    assert idx == 30  # pool5 is vgg.30
    out += [('vgg.31.weight', (1024, 512, 3, 3)), ('vgg.31.bias', (1024,)),
            ('vgg.33.weight', (1024, 1024, 1, 1)), ('vgg.33.bias', (1024,))]
    out += [('L2Norm.weight', (512,))]
    extras = [(1024, 256, 1), (256, 512, 3), (512, 128, 1), (128, 256, 3),
              (256, 128, 1), (128, 256, 3), (256, 128, 1), (128, 256, 3)]
    for i, (ci, co, k) in enumerate(extras):
        out += [('extras.%d.weight' % i, (co, ci, k, k)), ('extras.%d.bias' % i, (co,))]
    sources = [512, 1024, 512, 256, 256, 256]
    for head, per_box in (('loc', 4), ('conf', num_classes)):
        for i, (c, b) in enumerate(zip(sources, REF_MBOX)):
            out += [('%s.%d.weight' % (head, i), (b * per_box, c, 3, 3)),
                    ('%s.%d.bias' % (head, i), (b * per_box,))]
    return out


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


@pytest.fixture(scope='module')
def net():
    torch.manual_seed(0)
    return M.build_ssd('train', 300, 21)


def test_ssd_model_keys_and_shapes_equal_reference(net):
    expected = reference_keys_and_shapes(21)
    state = net.state_dict()
    assert len(state) == 71 == len(expected)
    assert list(state.keys()) == [k for k, _ in expected]
    for k, shape in expected:
        assert tuple(state[k].shape) == shape, k


def test_ssd_model_parameter_count_by_hand(net):
    # conv params by hand: k*k*cin*cout + cout
    conv = lambda cin, cout, k: k * k * cin * cout + cout
    vgg = (conv(3, 64, 3) + conv(64, 64, 3) + conv(64, 128, 3) + conv(128, 128, 3)
           + conv(128, 256, 3) + 2 * conv(256, 256, 3) + conv(256, 512, 3)
           + 2 * conv(512, 512, 3) + 3 * conv(512, 512, 3)
           + conv(512, 1024, 3) + conv(1024, 1024, 1))
    extras = (conv(1024, 256, 1) + conv(256, 512, 3) + conv(512, 128, 1) + conv(128, 256, 3)
              + 2 * (conv(256, 128, 1) + conv(128, 256, 3)))
    heads = sum(conv(c, b * 4, 3) + conv(c, b * 21, 3)
                for c, b in zip([512, 1024, 512, 256, 256, 256], REF_MBOX))
    by_hand = vgg + 512 + extras + heads
    assert by_hand == 26285486
    assert sum(p.numel() for p in net.parameters()) == 26285486
    assert sum(numel(s) for _, s in reference_keys_and_shapes(21)) == 26285486


def test_ssd_model_layers_as_reference(net):
    assert len(net.vgg) == 35
    assert net.vgg[16].ceil_mode and not net.vgg[23].ceil_mode
    pool5, conv6 = net.vgg[30], net.vgg[31]
    assert (pool5.kernel_size, pool5.stride, pool5.padding) == (3, 1, 1)
    assert conv6.dilation == (6, 6) and conv6.padding == (6, 6)
    strides = [e.stride for e in net.extras]
    pads = [e.padding for e in net.extras]
    assert strides == [(1, 1), (2, 2), (1, 1), (2, 2), (1, 1), (1, 1), (1, 1), (1, 1)]
    assert pads == [(0, 0), (1, 1), (0, 0), (1, 1), (0, 0), (0, 0), (0, 0), (0, 0)]
    assert torch.all(net.L2Norm.weight == 20) and net.L2Norm.eps == 1e-10
    assert 'priors' not in net.state_dict()


def test_ssd_model_forward_train_shapes():
    torch.manual_seed(0)
    small = M.build_ssd('train', 300, 6, width_mult=1 / 16)
    loc, conf, priors = small(torch.randn(2, 3, 300, 300))
    assert loc.shape == (2, 8732, 4)
    assert conf.shape == (2, 8732, 6)
    assert priors.shape == (8732, 4)
    # same keys as the full net, channels divided by 16, box counts not
    full_keys = [k for k, _ in reference_keys_and_shapes(6)]
    state = small.state_dict()
    assert list(state.keys()) == full_keys
    assert state['vgg.0.weight'].shape == (4, 3, 3, 3)
    assert state['vgg.31.weight'].shape == (64, 32, 3, 3)
    assert state['conf.1.weight'].shape == (36, 64, 3, 3)
    assert state['L2Norm.weight'].shape == (32,)


def test_ssd_model_l2norm_values():
    layer = M.L2Norm(3, 20)
    x = torch.tensor([3.0, 4.0, 0.0]).view(1, 3, 1, 1)
    out = layer(x).flatten()
    assert torch.allclose(out, torch.tensor([12.0, 16.0, 0.0]))


def test_ssd_model_strict_load_of_reference_layout(net, tmp_path):
    # a state_dict keyed and shaped as ssd.pytorch writes it (from a second instance)
    torch.manual_seed(1)
    other = M.build_ssd('train', 300, 21)
    ref_state = collections.OrderedDict(
        (k, other.state_dict()[k].clone()) for k, _ in reference_keys_and_shapes(21))
    path = tmp_path / 'ssd300_ref.pth'
    torch.save(ref_state, str(path))
    target = M.build_ssd('train', 300, 21)
    assert target.load_state_dict(torch.load(str(path)), strict=True).missing_keys == []
    for k, v in ref_state.items():
        assert torch.equal(target.state_dict()[k], v)
    fresh = M.build_ssd('train', 300, 21)
    fresh.load_weights(str(path))
    assert torch.equal(fresh.state_dict()['conf.5.bias'], ref_state['conf.5.bias'])


def test_ssd_model_base_weights(tmp_path):
    torch.manual_seed(0)
    net = M.build_ssd('train', 300, 6, width_mult=1 / 16)
    src = M.build_ssd('train', 300, 6, width_mult=1 / 16)
    # vgg16_reducedfc.pth layout: the vgg ModuleList's own keys '0.weight' ... '33.bias'
    base = {k[len('vgg.'):]: v for k, v in src.state_dict().items() if k.startswith('vgg.')}
    assert sorted(base) == sorted('%d.%s' % (i, p) for i in
                                  (0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28, 31, 33)
                                  for p in ('weight', 'bias'))
    path = tmp_path / 'vgg16_reducedfc.pth'
    torch.save(base, str(path))
    M.load_base_weights(net, str(path))
    assert torch.equal(net.vgg[33].weight, src.vgg[33].weight)
    missing = str(tmp_path / 'nowhere' / 'vgg16_reducedfc.pth')
    with pytest.raises(FileNotFoundError, match='nowhere/vgg16_reducedfc.pth'):
        M.load_base_weights(net, missing)
    assert [(len(r.loaded), r.total) for r in net.load_reports] == [(30, 30)]


def test_ssd_model_init_weights():
    torch.manual_seed(0)
    net = M.build_ssd('train', 300, 21, width_mult=1 / 8)
    before = net.vgg[0].weight.clone()
    for m in list(net.extras) + list(net.loc) + list(net.conf):
        torch.nn.init.constant_(m.bias, 5.0)
    M.init_weights(net)
    assert torch.equal(net.vgg[0].weight, before)  # the base is not touched
    for m in list(net.extras) + list(net.loc) + list(net.conf):
        assert torch.all(m.bias == 0)
        fan_in = m.weight.shape[1] * m.weight[0, 0].numel()
        fan_out = m.weight.shape[0] * m.weight[0, 0].numel()
        bound = (6.0 / (fan_in + fan_out)) ** 0.5
        assert m.weight.abs().max() <= bound
        assert m.weight.abs().max() > 0.5 * bound  # uniform over the whole Xavier range


def test_ssd_model_bad_arguments():
    with pytest.raises(ValueError, match='phase'):
        M.build_ssd('eval')
    with pytest.raises(ValueError, match='300'):
        M.build_ssd('train', size=512)


def test_ssd_model_test_phase_is_detect_on_softmax():
    from gluontrain.torch.ssd.detection import Detect
    torch.manual_seed(0)
    train = M.build_ssd('train', 300, 6, width_mult=1 / 16)
    test = M.build_ssd('test', 300, 6, width_mult=1 / 16)
    test.load_state_dict(train.state_dict(), strict=True)
    assert len(test.state_dict()) == 71  # softmax / Detect add no keys
    x = torch.randn(2, 3, 300, 300)
    with torch.no_grad():
        out = test(x)
        loc, conf, priors = train(x)
        expected = Detect(6, 0, 200, 0.01, 0.45)(loc, torch.softmax(conf, -1), priors)
    assert out.shape == (2, 6, 200, 5)
    assert torch.equal(out, expected)


def test_ssd_model_priors_follow_reference_cfg_choice():
    from gluontrain.torch.ssd.config import coco, voc
    from gluontrain.torch.ssd.prior_box import PriorBox
    voc_net = M.build_ssd('train', 300, 21, width_mult=1 / 16)
    coco_net = M.build_ssd('train', 300, 81, width_mult=1 / 16)
    assert torch.equal(voc_net.priors, PriorBox(voc).forward())
    assert torch.equal(coco_net.priors, PriorBox(coco).forward())
    # first prior of the 38x38 map: centre (4/300, 4/300), side min_size/300
    assert torch.allclose(voc_net.priors[0], torch.tensor([4 / 300, 4 / 300, 0.1, 0.1]))
    assert torch.allclose(coco_net.priors[0], torch.tensor([4 / 300, 4 / 300, 0.07, 0.07]))


def test_ssd_model_batch_norm_base_sources_conv4_3_and_conv7():
    torch.manual_seed(0)
    plain = M.build_ssd('train', width_mult=0.125)
    bn = M.build_ssd('train', width_mult=0.125, batch_norm=True)
    # 13 VGG convs gain a BatchNorm each: 35 + 13 layers; conv4_3's ReLU is the 33rd
    assert len(bn.vgg) == 48 and plain.conv4_3_end == 23 and bn.conv4_3_end == 33
    assert isinstance(bn.vgg[30], torch.nn.Conv2d) and isinstance(bn.vgg[31],
                                                                   torch.nn.BatchNorm2d)
    assert bn.L2Norm.weight.shape == (64,) and bn.loc[0].in_channels == 64
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in bn.vgg) == 13
    # the same geometry: the L2Norm input is conv4_3's 38 x 38 map in both
    seen = {}
    for name, n in (('plain', plain), ('bn', bn)):
        n.L2Norm.register_forward_hook(lambda m, i, o, name=name: seen.__setitem__(name,
                                                                                   i[0].shape))
        loc, conf, priors = n(torch.zeros(2, 3, 300, 300))
        assert loc.shape == (2, 8732, 4) and conf.shape == (2, 8732, 21)
    assert seen['plain'] == seen['bn'] == (2, 64, 38, 38)
    # without batch_norm, the reference's hard-coded indices still hold
    assert M.conv4_3_end(plain.vgg)[1] is plain.vgg[21]


def test_ssd_recipe_refuses_batch_norm_with_a_base_file():
    from gluontrain.torch.ssd.args import parse_args
    from gluontrain.torch.ssd.config import voc
    from gluontrain.torch.ssd.recipe import get_net
    args = parse_args(['--batch_norm', 'true', '--width_mult', '0.125'])
    args.cfg = voc
    with pytest.raises(ValueError, match="--basenet ''"):
        get_net(args, [torch.device('cpu')])


def _save_filled(path, recorded, legacy=False):
    """A plain state_dict laid out exactly as a recorded key list, filled by fill_tensor."""
    state = collections.OrderedDict((k, torch.from_numpy(v)) for k, v in
                                    fill_state(recorded['keys']).items())
    torch.save(state, str(path), _use_new_zipfile_serialization=not legacy)
    return state


def _our_outputs(net):
    net.eval()
    with torch.no_grad():
        loc, conf, priors = net(torch.from_numpy(fixed_input((1, 3, 300, 300))))
    return summarize(loc.numpy(), conf.numpy(), priors.numpy())


def _assert_same_outputs(ours, reference):
    assert np.array_equal(ours['rows'], reference['rows'])
    np.testing.assert_allclose(ours['priors_sum'], reference['priors_sum'], rtol=1e-12)
    np.testing.assert_allclose(ours['priors_head'], reference['priors_head'], rtol=1e-6)
    for name in ('loc', 'conf'):
        scale = np.abs(reference[name]).max()
        np.testing.assert_allclose(ours[name], reference[name], rtol=1e-4, atol=1e-5 * scale)
    np.testing.assert_allclose(ours['level_abs_sums'], reference['level_abs_sums'], rtol=1e-5)
    # a signed sum may nearly cancel: its error is bounded by that of the absolute sum
    diff = np.abs(ours['level_sums'] - reference['level_sums'])
    assert np.all(diff <= 1e-5 * reference['level_abs_sums']), diff


@pytest.fixture(scope='module')
def reference_filled(tmp_path_factory):
    """ssd.pytorch's build_ssd('train', 300, 21).state_dict() layout (recorded key list),
    filled deterministically, saved as torch.save(ssd_net.state_dict()), loaded through the
    recipe's --resume loader into our SSD300."""
    path = tmp_path_factory.mktemp('ssd_ref') / 'ssd300_VOC_filled.pth'
    _save_filled(path, load_key_list('ssd300_voc'))
    net = M.build_ssd('train', 300, 21)
    report = M.load_ssd_weights(net, str(path))
    return net, report, path


def test_reference_state_dict_loads_every_key(reference_filled):
    _, report, path = reference_filled
    assert (len(report.loaded), report.total, report.missing, report.unexpected,
            report.mismatched, report.ignored) == (71, 71, [], [], [], [])
    assert report.summary() == ('loaded 71 of 71 tensors from {} (0 missing, 0 unexpected, '
                                '0 wrong shape)'.format(path))


def test_outputs_equal_the_reference_s_with_the_same_weights(reference_filled):
    """Recorded from ssd.pytorch's own SSD (tests/fixtures/make_ssd_fixtures.py)."""
    reference = dict(np.load(os.path.join(FIXTURES, OUT_NAME)))
    _assert_same_outputs(_our_outputs(reference_filled[0]), reference)


@pytest.mark.live_reference
def test_outputs_equal_the_live_reference(reference_filled, tmp_path):
    refs = os.environ.get('GLUONTRAIN_REFERENCES')
    if not refs or not os.path.isdir(os.path.join(refs, 'ssd.pytorch')):
        pytest.skip('GLUONTRAIN_REFERENCES not set: ssd.pytorch\'s source is not available')
    subprocess.run([sys.executable, os.path.join(FIXTURES, 'make_ssd_fixtures.py'), '--out',
                    str(tmp_path)], check=True, capture_output=True,
                   env=dict(os.environ, OMP_NUM_THREADS='1'))
    live = dict(np.load(str(tmp_path / OUT_NAME)))
    _assert_same_outputs(_our_outputs(reference_filled[0]), live)
    recorded = dict(np.load(os.path.join(FIXTURES, OUT_NAME)))
    for name in ('loc', 'conf', 'level_sums'):  # the committed fixture is still the reference's
        np.testing.assert_allclose(live[name], recorded[name], rtol=1e-5, atol=1e-6)


def test_reference_vgg_base_loads_every_key(tmp_path):
    """vgg16_reducedfc.pth's layout (a 2017 file: torch's legacy serialisation)."""
    path = tmp_path / 'vgg16_reducedfc.pth'
    state = _save_filled(path, load_key_list('ssd300_vgg16_reducedfc'), legacy=True)
    net = M.build_ssd('train', 300, 21)
    assert M.load_base_weights(net, str(path)) is net
    (report,) = net.load_reports
    assert (len(report.loaded), report.total, report.missing, report.unexpected) == (
        30, 30, [], [])
    assert torch.equal(net.vgg[33].bias, state['33.bias'])


def test_files_that_do_not_fit_are_one_line(tmp_path):
    small = M.build_ssd('train', 300, 21, width_mult=1 / 16)
    full = tmp_path / 'ssd.pth'
    torch.save(M.build_ssd('train', 300, 21, width_mult=1 / 16).state_dict(), str(full))
    base = tmp_path / 'vgg.pth'
    torch.save(small.vgg.state_dict(), str(base))
    frcnn = tmp_path / 'model_last.pth.tar'
    torch.save({'config': '', 'state_dict': {'body': {}}, 'training_meta': {}}, str(frcnn))
    five = tmp_path / 'voc5.pth'
    torch.save(M.build_ssd('train', 300, 6, width_mult=1 / 16).state_dict(), str(five))
    bigger = tmp_path / 'bigger.pth'
    torch.save(dict(small.state_dict(), **{'extra.weight': torch.zeros(1)}), str(bigger))
    cases = [
        (M.load_base_weights, full, "--basenet {}: loaded 0 of 30 tensors; it looks like an "
                                    "ssd.pytorch SSD300 state_dict; " + M.BASENET_FIX),
        (M.load_ssd_weights, base, "--resume {}: loaded 0 of 71 tensors; it looks like a "
                                   "VGG16 base (vgg16_reducedfc.pth); " + M.RESUME_FIX),
        (M.load_ssd_weights, frcnn, "--resume {}: loaded 0 of 71 tensors; it looks like a "
                                    "seamseg / gluontrain two-stage (frcnn) snapshot (config, "
                                    "state_dict, training_meta); " + M.RESUME_FIX),
        # 6 classes in the file, 21 in the net: the conf heads (6 x 2 tensors) do not fit
        (M.load_ssd_weights, five, "--resume {}: loaded 59 of 71 tensors (0 missing, 0 "
                                   "unexpected, 12 wrong shape); wrong shape 'conf.0.weight' "
                                   "((24, 32, 3, 3) in the file, (84, 32, 3, 3) in the model) "
                                   "and 11 more; " + M.RESUME_FIX),
        # strict as the reference's load_state_dict: an extra tensor is refused
        (M.load_ssd_weights, bigger, "--resume {}: loaded 71 of 71 tensors (0 missing, 1 "
                                     "unexpected, 0 wrong shape); unexpected extra.weight; " +
                                     M.RESUME_FIX)]
    for load, path, message in cases:
        net = M.build_ssd('train', 300, 21, width_mult=1 / 16)
        before = net.vgg[0].weight.detach().clone()
        with pytest.raises(WeightsLoadError) as info:
            load(net, str(path))
        assert str(info.value) == message.format(path)
        assert torch.equal(net.vgg[0].weight, before)  # nothing loaded
    (tmp_path / 'empty.pth').write_bytes(b'')
    with pytest.raises(WeightsLoadError, match=r'^--resume .*empty.pth is empty \(0 bytes'):
        M.load_ssd_weights(small, str(tmp_path / 'empty.pth'))
    (tmp_path / 'cut.pth').write_bytes(full.read_bytes()[:1000])
    with pytest.raises(WeightsLoadError, match=r'^--basenet .*cut.pth is truncated or corrupt'):
        M.load_base_weights(small, str(tmp_path / 'cut.pth'))
