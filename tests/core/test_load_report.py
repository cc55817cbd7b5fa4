"""Load reports: hand-computed counts, detectron2's key grouping, one-line refusals."""
import pytest

from gluontrain.core.load_report import (LoadReport, WeightsLoadError, check, compare,
                                         group_keys, guess_origin, matches_ignore)

TARGET = {'body.conv1.weight': (8, 3, 3, 3), 'body.bn1.weight': (8,), 'body.bn1.bias': (8,),
          'body.bn1.running_mean': (8,), 'body.bn1.num_batches_tracked': (),
          'head.fc.weight': (5, 8), 'head.fc.bias': (5,)}


def test_group_keys_as_detectron2():
    # detectron2's _group_checkpoint_keys / _group_to_str: prefix up to the last '.', the
    # suffixes sorted inside '{..., ...}', a lone suffix joined with '.', no-dot keys alone
    keys = ['a.b.weight', 'a.b.bias', 'a.c.weight', 'top', 'x.y.z.running_var',
            'x.y.z.running_mean', 'x.y.z.num_batches_tracked']
    assert group_keys(keys) == ['a.b.{bias, weight}', 'a.c.weight', 'top',
                                'x.y.z.{num_batches_tracked, running_mean, running_var}']
    assert group_keys([]) == []


def test_compare_counts_every_kind():
    file_shapes = {'body.conv1.weight': (8, 3, 3, 3), 'body.bn1.weight': (8,),
                   'body.bn1.bias': (8,), 'head.fc.weight': (21, 8), 'head.fc.bias': (21,),
                   'extra.w': (1,), 'extra.b': (1,)}
    report = compare(TARGET, file_shapes, 'w.pth', ignore=('num_batches_tracked',))
    assert report.loaded == ['body.conv1.weight', 'body.bn1.weight', 'body.bn1.bias']
    assert report.missing == ['body.bn1.running_mean']
    assert report.ignored == ['body.bn1.num_batches_tracked']
    assert report.unexpected == ['extra.w', 'extra.b']
    assert report.mismatched == [('head.fc.weight', (5, 8), (21, 8)),
                                 ('head.fc.bias', (5,), (21,))]
    # 7 target tensors, 1 not expected: 3 loaded + 1 missing + 2 wrong shape = 6
    assert report.total == 6 and not report.complete
    assert report.summary() == ('loaded 3 of 6 tensors from w.pth (1 missing, 2 unexpected, '
                                '2 wrong shape); 1 not expected in the file '
                                '(num_batches_tracked)')
    assert report.format().splitlines() == [
        report.summary(),
        "Skip loading parameter 'head.fc.weight' to the model due to incompatible shapes: "
        "(21, 8) in the checkpoint but (5, 8) in the model!",
        "Skip loading parameter 'head.fc.bias' to the model due to incompatible shapes: "
        "(21,) in the checkpoint but (5,) in the model!",
        'Some model parameters or buffers are not found in the checkpoint:',
        '  body.bn1.running_mean',
        'The checkpoint contains parameters not used by the model:',
        '  extra.{b, w}']


def test_ignored_key_present_in_the_file_is_loaded():
    report = compare({'bn.num_batches_tracked': (), 'bn.weight': (2,)},
                     {'bn.num_batches_tracked': (), 'bn.weight': (2,)}, 'f',
                     ignore=('num_batches_tracked',))
    assert (report.loaded, report.ignored, report.total) == (
        ['bn.num_batches_tracked', 'bn.weight'], [], 2)
    assert report.summary() == ('loaded 2 of 2 tensors from f (0 missing, 0 unexpected, '
                                '0 wrong shape)')
    assert matches_ignore('a.num_batches_tracked', lambda k: k.startswith('a.'))
    assert not matches_ignore('a.xnum_batches_tracked', ('num_batches_tracked',))


def test_mapping_renames_and_unmaps():
    report = compare({'vgg.0.weight': (4, 3), 'vgg.0.bias': (4,), 'L2Norm.weight': (4,)},
                     {'0.weight': (4, 3), '0.bias': (4,), 'L2Norm.weight': (4,)}, 'base.pth',
                     mapping={'vgg.0.weight': '0.weight', 'vgg.0.bias': '0.bias',
                              'L2Norm.weight': None})
    assert report.loaded == ['vgg.0.weight', 'vgg.0.bias']
    assert report.missing == ['L2Norm.weight'] and report.unexpected == ['L2Norm.weight']
    assert report.mapping == {'vgg.0.weight': '0.weight', 'vgg.0.bias': '0.bias',
                              'L2Norm.weight': None}


def test_non_tensor_entry_is_a_wrong_shape():
    report = compare({'a': (2,)}, {'a': None}, 'f')
    assert report.mismatched == [('a', (2,), None)]
    assert 'no tensor in the checkpoint' in report.format()


def test_check_zero_loaded_names_file_origin_and_fix():
    ssd_keys = {'vgg.0.weight': (64, 3, 3, 3), 'loc.0.weight': (16, 512, 3, 3),
                'conf.0.weight': (84, 512, 3, 3)}
    report = compare(TARGET, ssd_keys, 'ssd300.pth')
    with pytest.raises(WeightsLoadError) as info:
        check(report, '--resume', 'pass a snapshot of this recipe', allow_partial=True)
    assert str(info.value) == ('--resume ssd300.pth: loaded 0 of 7 tensors; it looks like an '
                               'ssd.pytorch SSD300 state_dict; pass a snapshot of this recipe')
    assert isinstance(info.value, ValueError) and '\n' not in str(info.value)
    # unknown layout: a few of each side's keys instead
    report = compare({'a.w': (1,), 'a.b': (1,)}, {'q.r': (1,)}, 'x.pth')
    with pytest.raises(WeightsLoadError, match=r"^--w x.pth: loaded 0 of 2 tensors; none of "
                                               r"its keys \(q.r\) is a key of the model "
                                               r"\(a.\{b, w\}\); fix$"):
        check(report, '--w', 'fix')
    with pytest.raises(WeightsLoadError, match='it holds no tensors'):
        check(compare({'a': (1,)}, {}, 'e.pth'), '--w', 'fix', allow_partial=True)
    with pytest.raises(WeightsLoadError, match=r"^--w s.pth: loaded 0 of 2 tensors; every "
                                               r"tensor it shares with the model has another "
                                               r"shape \('a': \(3,\) in the file, \(1,\) in "
                                               r"the model\); fix$"):
        check(compare({'a': (1,), 'b': (1,)}, {'a': (3,)}, 's.pth'), '--w', 'fix',
              allow_partial=True)


def test_check_partial():
    report = compare({'a.w': (1,), 'a.b': (1,), 'c.w': (2,), 'd.w': (3,)},
                     {'a.w': (1,), 'c.w': (5,), 'd.w': (4,), 'z': (1,)}, 'p.pth')
    assert check(report, '--pre_train', 'fix', allow_partial=True) is report
    with pytest.raises(WeightsLoadError) as info:
        check(report, '--pre_train', 'fix')
    assert str(info.value) == (
        "--pre_train p.pth: loaded 1 of 4 tensors (1 missing, 1 unexpected, 2 wrong shape); "
        "missing a.b; wrong shape 'c.w' ((5,) in the file, (2,) in the model) and 1 more; fix")
    # unexpected keys alone are reported, not refused, unless asked (strict=True's rule)
    complete = compare({'a': (1,)}, {'a': (1,), 'b.x': (1,), 'b.y': (1,)}, 'f')
    assert check(complete, '--w', 'fix') is complete and complete.unexpected == ['b.x', 'b.y']
    with pytest.raises(WeightsLoadError) as info:
        check(complete, '--w', 'fix', allow_unexpected=False)
    assert str(info.value) == ('--w f: loaded 1 of 1 tensors (0 missing, 2 unexpected, 0 wrong '
                               'shape); unexpected b.{x, y}; fix')
    # an empty target loads nothing and that is fine
    assert check(compare({}, {'a': (1,)}, 'f'), '--w', 'fix').total == 0


def test_check_truncates_long_missing_lists():
    target = {'m{}.w'.format(i): (1,) for i in range(10)}
    target['keep'] = (1,)
    report = compare(target, {'keep': (1,)}, 'f')
    with pytest.raises(WeightsLoadError, match=r'missing m0.w, m1.w, m2.w, m3.w, \.\.\.; fix'):
        check(report, '--w', 'fix')


@pytest.mark.parametrize('keys, origin', [
    (['rpn_head.conv_obj.weight', 'roi_head.roi_cls.weight'],
     'a seamseg / gluontrain two-stage (frcnn) snapshot'),
    (['mod1.conv1.weight', 'mod2.block1.convs.conv1.weight'],
     'a seamseg ResNet body (mod1 ... mod5)'),
    (['module.backbone.body.stem.conv1.weight', 'module.roi_heads.relation.predictor.w'],
     'a Scene-Graph-Benchmark relation model'),
    (['backbone.body.stem.conv1.weight', 'rpn.head.conv.weight'],
     'a Scene-Graph-Benchmark / maskrcnn-benchmark model'),
    (['conv1_w', 'res2_0_branch2a_w'], 'a Detectron (Caffe2) ResNet .pkl'),
    (['vgg.0.weight', 'L2Norm.weight', 'extras.0.weight', 'loc.0.weight', 'conf.0.bias'],
     'an ssd.pytorch SSD300 state_dict'),
    (['0.weight', '0.bias', '33.weight', '33.bias'], 'a VGG16 base (vgg16_reducedfc.pth)'),
    (['yolo_outputs.0.prediction.weight', 'stages.0.0.conv.weight'], 'a GluonCV YOLOv3 .params'),
    (['conv1.weight', 'bn1.running_mean', 'layer1.0.conv1.weight', 'fc.weight'],
     'a torchvision ResNet'),
    (['features.0.weight', 'classifier.0.weight'], 'a torchvision VGG'),
    (['version', 'params', 'trainer', 'epoch'], 'a gluontrain checkpoint'),
    (['config', 'state_dict', 'training_meta'],
     'a seamseg / gluontrain two-stage (frcnn) snapshot (config, state_dict, training_meta)'),
    (['model', 'optimizer', 'scheduler', 'iteration'],
     'a Scene-Graph-Benchmark / maskrcnn-benchmark checkpoint (model, optimizer, ...)'),
    (['body.backbone.mod1.conv1.weight', 'body.fpn.inner.0.weight'],
     'a seamseg / gluontrain two-stage (frcnn) snapshot'),
    (['backbone.mod1.conv1.weight', 'fpn.inner.0.weight'],
     'a seamseg / gluontrain two-stage (frcnn) snapshot'),
    (['foo.bar'], None), ([], None)])
def test_guess_origin(keys, origin):
    assert guess_origin(keys) == origin


def test_report_attributes():
    report = LoadReport('f', 3, ['a'], ['b'], [], [('c', (1,), (2,))])
    assert (report.total, report.ignored, report.complete) == (3, [], False)
    assert repr(report) == ('<LoadReport loaded 1 of 3 tensors from f (1 missing, 0 unexpected, '
                            '1 wrong shape)>')


def test_ignored_keys_are_named_by_kind():
    """``rpn.anchor_generator.cell_anchors.0`` is a ``cell_anchors`` buffer, not a ``0``."""
    report = compare({'a.cell_anchors.0': (3, 4), 'a.cell_anchors.1': (3, 4), 'b.weight': (2,),
                      'bn.running_var': (2,)}, {'b.weight': (2,)}, 'f.pth',
                     ignore=lambda k: 'cell_anchors' in k or k.endswith('running_var'))
    assert report.summary().endswith('; 3 not expected in the file (cell_anchors, running_var)')
