"""weights: GluonCV's own .params load unchanged with a report; foreign files are one line."""
import glob
import json
import os
import pickle
import zipfile
from argparse import Namespace

import mxnet as mx
import numpy as np
import pytest

from gluontrain.core import checkpoint as ckpt_io
from gluontrain.core.load_report import WeightsLoadError
from gluontrain.mx import blobs
from gluontrain.mx._gluoncv import gluoncv
from gluontrain.mx.yolo3 import get_net
from gluontrain.mx.yolo3.recipe import load_weights
from gluontrain.mx.yolo3.weights import (base_mapping, describe, load_params, read_params,
                                         target_shapes)

REFERENCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fixtures',
                          'references')
FIX = 'pass the right file'


def _zoo(name, seed=0, **kwargs):
    """GluonCV's own network: built by gluoncv, seeded init, one forward at 64 px."""
    mx.random.seed(seed)
    if name.startswith('yolo3_'):
        kwargs['pretrained_base'] = False
    net = gluoncv.model_zoo.get_model(name, pretrained=False, **kwargs)
    net.initialize()
    net(mx.nd.zeros((1, 3, 64, 64)))
    return net


def _ours(network, dataset, classes=''):
    net, _ = get_net(Namespace(network=network, dataset=dataset, classes=classes, syncbn=False,
                               no_pretrained_base=True), [mx.cpu()])
    return net


@pytest.fixture(scope='module')
def zoo_files(tmp_path_factory):
    """``save_parameters`` files of gluoncv's own zoo YOLOv3s (darknet53 is 247 MB: once)."""
    folder = tmp_path_factory.mktemp('zoo')
    files = {}
    for name in ('yolo3_darknet53_voc', 'yolo3_mobilenet1.0_coco', 'yolo3_mobilenet1.0_voc',
                 'yolo3_mobilenet0.25_voc'):
        files[name] = str(folder / (name + '.params'))
        _zoo(name).save_parameters(files[name])
    return files


@pytest.mark.parametrize('path', sorted(glob.glob(os.path.join(REFERENCES, 'yolo3_*.json'))),
                         ids=os.path.basename)
def test_target_shapes_are_the_recorded_gluoncv_layout_key_for_key(path):
    with open(path) as f:
        recorded = json.load(f)
    network, dataset = recorded['config'].split("'")[1].split('_')[1:]
    shapes = target_shapes(_ours(network, dataset))  # before any forward: inferred
    assert list(shapes) == [k for k, _, _ in recorded['keys']]
    assert shapes == {k: tuple(s) for k, s, _ in recorded['keys']}
    assert describe(shapes) == (network, recorded['classes'])


@pytest.mark.parametrize('name', ['yolo3_darknet53_voc', 'yolo3_mobilenet1.0_coco',
                                  'yolo3_mobilenet1.0_voc', 'yolo3_mobilenet0.25_voc'])
@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_gluoncv_params_load_unchanged_into_get_net(zoo_files, name):
    network, dataset = name.split('_')[1:]
    ref = _zoo(name)
    file_keys = mx.nd.load(zoo_files[name])
    net = _ours(network, dataset)
    report = load_weights(zoo_files[name], net, net, [mx.cpu()], '--resume')
    assert (report.total, len(report.loaded)) == (len(file_keys), len(file_keys))
    assert not (report.missing or report.unexpected or report.mismatched)
    assert report.summary() == 'loaded {0} of {0} tensors from {1} (0 missing, 0 unexpected, ' \
        '0 wrong shape)'.format(len(file_keys), zoo_files[name])
    for key, param in net._collect_params_with_prefix().items():
        np.testing.assert_array_equal(param.data().asnumpy(), file_keys[key].asnumpy(), key)
    x = mx.nd.random.uniform(-1, 1, (1, 3, 64, 64))
    for a, b in zip(ref(x), net(x)):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_darknet53_file_into_a_mobilenet_net_says_what_it_is(zoo_files):
    path = zoo_files['yolo3_darknet53_voc']
    with pytest.raises(WeightsLoadError) as e:
        load_weights(path, _ours('mobilenet1.0', 'voc'), None, [mx.cpu()], '--resume')
    line = str(e.value)
    assert '\n' not in line
    assert line.startswith('--resume {} holds the weights of another network: loaded '
                           .format(path))
    assert 'it looks like a GluonCV YOLOv3 darknet53 with 20 classes (as yolo3_darknet53_voc) ' \
        'but this is a YOLOv3 mobilenet1.0 with 20 classes' in line
    assert '(it fits --network darknet53 --dataset voc)' in line and 'same --network' in line


def test_other_classes_and_other_width_name_the_fitting_arguments(zoo_files, tmp_path):
    path = str(tmp_path / 'two.params')
    _zoo('yolo3_mobilenet0.25_custom', classes=['a', 'b']).save_parameters(path)
    with pytest.raises(WeightsLoadError, match=r'loaded 241 of 247 tensors \(0 missing, 0 '
                       r'unexpected, 6 wrong shape\); it looks like a GluonCV YOLOv3 '
                       r'mobilenet0.25 with 2 classes .* with 20 classes .*\(it fits --network '
                       r'mobilenet0.25 with 2 classes\)'):
        load_params(_ours('mobilenet0.25', 'voc'), path, '--params', FIX)
    with pytest.raises(WeightsLoadError, match=r'looks like a GluonCV YOLOv3 mobilenet1.0 with 80 '
                       r'classes \(as yolo3_mobilenet1.0_coco\) but this is a YOLOv3 '
                       r'mobilenet0.25 with 80'):
        load_params(_ours('mobilenet0.25', 'coco'), zoo_files['yolo3_mobilenet1.0_coco'],
                    '--params', FIX)


def test_an_imagenet_base_is_not_a_detector(tmp_path):
    path = str(tmp_path / 'mobilenet0.25.params')
    _zoo('mobilenet0.25').save_parameters(path)
    with pytest.raises(WeightsLoadError, match='loaded 0 of 247 tensors .*looks like a GluonCV '
                       r'mobilenet0.25 ImageNet classifier \(features'):
        load_params(_ours('mobilenet0.25', 'voc'), path, '--params', FIX)


def test_a_torch_file_says_it_is_one_and_what_it_holds(tmp_path):
    torch = pytest.importorskip('torch')
    path = str(tmp_path / 'ssd300.pth')
    torch.save({'vgg.0.weight': torch.zeros(2), 'loc.0.weight': torch.zeros(2),
                'conf.0.weight': torch.zeros(2)}, path)
    with pytest.raises(WeightsLoadError) as e:
        read_params(path, '--resume', FIX)
    assert str(e.value) == ('--resume {} is not an MXNet .params file: it is a PyTorch '
                            '(torch.save) file, an ssd.pytorch SSD300 state_dict, which a GluonCV '
                            'YOLOv3 cannot load; {}'.format(path, FIX))


def test_truncated_empty_junk_and_absent_files_are_one_line(zoo_files, tmp_path):
    data = open(zoo_files['yolo3_mobilenet0.25_voc'], 'rb').read()
    cases = {'truncated': (data[:len(data) // 2], 'is not an MXNet .params file that can be '
                           'read: it is truncated or corrupt'),
             'empty': (b'', 'is not an MXNet .params file: it is empty (0 bytes'),
             'junk': (b'not weights', "is not an MXNet .params file (it starts with b'not weig")}
    for name, (content, message) in cases.items():
        path = tmp_path / (name + '.params')
        path.write_bytes(content)
        with pytest.raises(WeightsLoadError) as e:
            read_params(str(path), '--load-weights', FIX)
        assert str(e.value).startswith('--load-weights {} {}'.format(path, message))
        assert str(e.value).endswith(FIX) and '\n' not in str(e.value)
    with pytest.raises(FileNotFoundError, match='--params .*absent.params does not exist; ' + FIX):
        read_params(str(tmp_path / 'absent.params'), '--params', FIX)
    mx.nd.save(str(tmp_path / 'list.params'), [mx.nd.zeros(2)])
    with pytest.raises(WeightsLoadError, match='an unnamed list of 1 arrays'):
        read_params(str(tmp_path / 'list.params'), '--params', FIX)


def test_an_exported_models_params_point_to_symbol_and_exported_params(tmp_path):
    net = _zoo('yolo3_mobilenet0.25_voc')
    net.hybridize()
    net(mx.nd.zeros((1, 3, 64, 64)))
    net.export(str(tmp_path / 'model'))
    with pytest.raises(WeightsLoadError, match='exported model .*--exported-params .*--symbol'):
        load_params(_ours('mobilenet0.25', 'voc'), str(tmp_path / 'model-0000.params'),
                    '--params', FIX)


def _edited(source, path, drop=(), add=None, reshape=None):
    arrays = mx.nd.load(source)
    for key in drop:
        del arrays[key]
    arrays.update(add or {})
    for key in reshape or ():
        arrays[key] = mx.nd.zeros((1,) + arrays[key].shape[1:])
    mx.nd.save(path, arrays)
    return path


def test_allow_missing_and_ignore_extra_keep_gluons_meaning(zoo_files, tmp_path):
    source = zoo_files['yolo3_mobilenet0.25_voc']
    gap = _edited(source, str(tmp_path / 'gap.params'), drop=['yolo_outputs.2.prediction.bias'])
    with pytest.raises(WeightsLoadError, match=r'loaded 246 of 247 tensors \(1 missing, 0 '
                       r'unexpected, 0 wrong shape\); missing yolo_outputs.2.prediction.bias'):
        load_params(_ours('mobilenet0.25', 'voc'), gap, '--params', FIX)
    net = _ours('mobilenet0.25', 'voc')
    report = load_params(net, gap, '--params', FIX, allow_missing=True)
    assert report.missing == ['yolo_outputs.2.prediction.bias'] and len(report.loaded) == 246
    assert 'not found in the checkpoint:\n  yolo_outputs.2.prediction.bias' in report.format()

    extra = _edited(source, str(tmp_path / 'extra.params'), add={'head.w': mx.nd.zeros(3)})
    with pytest.raises(WeightsLoadError, match=r'\(0 missing, 1 unexpected, 0 wrong shape\); '
                       r'the network has no head.w; '):
        load_params(_ours('mobilenet0.25', 'voc'), extra, '--params', FIX)
    report = load_params(_ours('mobilenet0.25', 'voc'), extra, '--params', FIX,
                         ignore_extra=True)
    assert report.unexpected == ['head.w'] and len(report.loaded) == 247

    wrong = _edited(source, str(tmp_path / 'wrong.params'), reshape=['stages.0.0.weight'])
    for allow in (False, True):  # a wrong shape is refused even with allow_missing, as Gluon
        with pytest.raises(WeightsLoadError, match=r"wrong shape 'stages.0.0.weight' \(\(1, 3, 3, "
                           r"3\) in the file, \(8, 3, 3, 3\) in the model\)"):
            load_params(_ours('mobilenet0.25', 'voc'), wrong, '--params', FIX,
                        allow_missing=allow)


def test_global_name_files_are_refused_and_checkpoints_load(tmp_path):
    ref = _zoo('yolo3_mobilenet0.25_voc')
    legacy = str(tmp_path / 'legacy.params')
    ref.collect_params().save(legacy)  # global names: yolov30_..., mobilenet0_... (base layers)
    with pytest.raises(WeightsLoadError, match='under their global names .*save_parameters'):
        load_params(_ours('mobilenet0.25', 'voc'), legacy, '--params', FIX)
    x = mx.nd.random.uniform(-1, 1, (1, 3, 64, 64))

    ckpt = str(tmp_path / 'run_last.ckpt')
    ckpt_io.save_checkpoint(ckpt, params=blobs.to_bytes(ref.save_parameters, ckpt), trainer=b'',
                            epoch=0, iteration=0, best_score=0.0, args={})
    net = _ours('mobilenet0.25', 'voc')
    assert load_params(net, ckpt, '--params', FIX).summary().startswith(
        'loaded 247 of 247 tensors from ' + ckpt)
    np.testing.assert_array_equal(ref(x)[1].asnumpy(), net(x)[1].asnumpy())


def test_base_mapping_names_the_imagenet_layers_gluoncv_slices():
    net = _ours('darknet53', 'voc')
    mapping = base_mapping(net)
    base = gluoncv.model_zoo.get_model('darknet53', pretrained=False)
    base_keys = set(base._collect_params_with_prefix())
    # every stage tensor is a base tensor; the base has only its classifier besides
    assert set(mapping.values()) <= base_keys
    assert sorted(base_keys - set(mapping.values())) == ['output.bias', 'output.weight']
    assert mapping['stages.1.0.0.weight'] == 'features.15.0.weight'  # features[15:24]
    assert mapping['stages.2.0.0.weight'] == 'features.24.0.weight'  # features[24:]


class _Hostile:
    """Unpickling it would create a folder (what ``os.system`` would do, harmless)."""

    def __init__(self, folder):
        self.folder = folder

    def __reduce__(self):
        return os.mkdir, (self.folder,)


def test_keys_only_reader_never_builds_the_files_objects(tmp_path):
    path, folder = tmp_path / 'hostile.pth', tmp_path / 'created'
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('archive/data.pkl', pickle.dumps({'w': _Hostile(str(folder))}, 2))
    with pytest.raises(WeightsLoadError, match=r'is a PyTorch \(torch.save\) file, which'):
        read_params(str(path), '--params', FIX)
    assert not folder.exists()
    # the same pickle, read as pickle does, would have run it: the test can fail
    with zipfile.ZipFile(path) as archive:
        pickle.loads(archive.read('archive/data.pkl'))
    assert folder.exists()


def test_weights_load_before_the_training_contexts_are_set(zoo_files):
    # get_net initialises on the default context; train() moves the parameters to the
    # training contexts afterwards. Loading onto those contexts first (Gluon's ctx=) fails
    # its "previously initialized on" check: the reference loads without ctx, and so does
    # load_weights
    path = zoo_files['yolo3_mobilenet0.25_voc']
    ctx = [mx.cpu(0), mx.cpu(1)]
    with pytest.raises(AssertionError, match='previous initialized on'):
        _ours('mobilenet0.25', 'voc').load_parameters(path, ctx=ctx)
    net = _ours('mobilenet0.25', 'voc')
    load_weights(path, net, net, ctx)
    net.collect_params().reset_ctx(ctx)
    weight = net._collect_params_with_prefix()['yolo_outputs.0.prediction.weight']
    assert weight.list_ctx() == ctx
    np.testing.assert_array_equal(weight.data(mx.cpu(1)).asnumpy(),
                                  mx.nd.load(path)['yolo_outputs.0.prediction.weight'].asnumpy())


def test_an_old_style_torch_pickle_is_refused_unread(tmp_path):
    torch = pytest.importorskip('torch')
    path = str(tmp_path / 'vgg16_reducedfc.pth')
    torch.save({'0.weight': torch.zeros(2)}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(WeightsLoadError) as e:
        read_params(path, '--params', FIX)
    assert str(e.value).startswith('--params {} is not an MXNet .params file: it is a pickle '
                                   'that is no gluontrain checkpoint'.format(path))
    assert str(e.value).endswith(FIX) and '\n' not in str(e.value)
