"""Datasets, loaders and the mixup-reaches-workers fix."""
import os
import re

import numpy as np
import pytest

from gluontrain.data.checks import DatasetError
from gluontrain.mx.yolo3 import get_dataloader, get_dataset, get_net, parse_args
from gluontrain.mx.yolo3.data import MixupDetection, SharedMixupDetection, mixup_dataset


def _setup(voc_root, *extra):
    args = parse_args(['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root',
                       str(voc_root), '--no-pretrained-base', '--gpus', '', '--batch-size', '4',
                       '--data-shape', '128', '--no-random-shape'] + list(extra))
    import mxnet as mx
    train_ds, val_ds, metric = get_dataset(args.dataset, args)
    net, async_net = get_net(args, [mx.cpu()])
    return args, train_ds, val_ds, metric, async_net


def test_loader_yields_the_seven_reference_arrays(voc_root):
    args, train_ds, val_ds, _, net = _setup(voc_root, '-j', '0')
    train_data, val_data = get_dataloader(net, train_ds, val_ds, 128, 4, 0, args)
    batch = next(iter(train_data))
    n = 3 * sum((128 // s) ** 2 for s in (32, 16, 8))  # anchors per image over 3 scales
    assert [b.shape for b in batch[:6]] == [(4, 3, 128, 128), (4, n, 1), (4, n, 2), (4, n, 2),
                                            (4, n, 2), (4, n, 20)]
    assert batch[6].shape[0] == 4 and batch[6].shape[2] == 4
    assert args.num_samples == len(train_ds)
    img, label = next(iter(val_data))
    assert img.shape[1:] == (3, 128, 128) and label.shape[2] == 6  # box, class, difficult


def _objectness_values(args, train_ds, val_ds, net, workers):
    train_data, _ = get_dataloader(net, train_ds, val_ds, 128, 4, workers, args)
    mixup_dataset(train_data).set_mixup(np.random.beta, 1.5, 1.5)  # as train() does each epoch
    obj = np.concatenate([b[1].asnumpy().ravel() for _, b in zip(range(3), train_data)])
    return obj[obj > 0]


@pytest.mark.parametrize('workers', [0, 2])
def test_mixup_reaches_worker_processes(voc_root, workers):
    args, train_ds, val_ds, _, net = _setup(voc_root, '--mixup')
    assert isinstance(train_ds, SharedMixupDetection)
    # a mixed sample's objectness targets carry its mixup weight (< 1); unmixed ones are 1
    obj = _objectness_values(args, train_ds, val_ds, net, workers)
    assert (obj < 0.999).mean() > 0.5


def test_reference_mixup_switch_reproduces_the_worker_bug(voc_root):
    args, train_ds, val_ds, _, net = _setup(voc_root, '--mixup', '--reference-mixup')
    assert type(train_ds) is MixupDetection
    obj = _objectness_values(args, train_ds, val_ds, net, workers=2)
    assert np.all(obj == 1.0)  # the workers never saw set_mixup: nothing was mixed


def test_shared_mixup_switch_off_and_unsupported_sampler(voc_root):
    args, train_ds, val_ds, _, net = _setup(voc_root, '--mixup')
    train_data, _ = get_dataloader(net, train_ds, val_ds, 128, 4, 2, args)
    train_ds.set_mixup(np.random.beta, 1.5, 1.5)
    train_ds.set_mixup(None)  # the last epochs (--no-mixup-epochs) switch it off again
    vals = np.concatenate([b[1].asnumpy().ravel() for _, b in zip(range(2), train_data)])
    assert np.all(vals[vals > 0] == 1.0)
    with pytest.raises(ValueError, match='np.random.beta'):
        train_ds.set_mixup(np.random.uniform, 0, 1)


def test_missing_dataset_root_names_the_folder(tmp_path):
    args = parse_args(['--dataset', 'voc', '--dataset-root', str(tmp_path / 'nope')])
    with pytest.raises(DatasetError, match='nope'):
        get_dataset('voc', args)
    with pytest.raises(ValueError, match='--dataset custom needs --dataset-root'):
        get_dataset('custom', parse_args(['--dataset', 'custom']))


def _voc_copy(voc_root, tmp_path):
    import shutil  # pylint: disable=import-outside-toplevel
    root = str(tmp_path / 'voc')
    shutil.copytree(voc_root, root)
    with open(os.path.join(root, 'VOC2007', 'ImageSets', 'Main', 'trainval.txt')) as f:
        image_id = f.readline().strip()
    return root, os.path.join(root, 'VOC2007', 'JPEGImages', image_id + '.jpg')


@pytest.mark.parametrize('content, reason', [(b'', 'is empty (0 bytes)'),
                                             (b'<html>404</html>', 'is not an image file')])
def test_unreadable_image_is_refused_in_one_line_before_training(voc_root, tmp_path, content,
                                                                 reason):
    root, jpg = _voc_copy(voc_root, tmp_path)
    with open(jpg, 'wb') as f:
        f.write(content)
    args = parse_args(['--dataset', 'voc', '--dataset-root', root])
    with pytest.raises(DatasetError) as e:
        get_dataset('voc', args)
    assert str(e.value) == (
        '1 problem in VOC dataset {}: image {} {}: restore it or remove {!r} from the ImageSets '
        'list.'.format(root, jpg, reason, os.path.basename(jpg)[:-4]))


def test_truncated_image_is_read_as_the_reference_reads_it_with_a_warning(voc_root, tmp_path):
    root, jpg = _voc_copy(voc_root, tmp_path)
    with open(jpg, 'rb') as f:
        data = f.read()
    with open(jpg, 'wb') as f:
        f.write(data[:len(data) // 2])
    args = parse_args(['--dataset', 'voc', '--dataset-root', root])
    with pytest.warns(UserWarning, match=r'1 image looks truncated \(no end marker\): {}; OpenCV '
                      r'decodes the missing part as blank pixels'.format(re.escape(jpg))):
        train_ds, _, _ = get_dataset('voc', args)
    # gluoncv decodes it without an error, as the reference does
    assert train_ds[0][0].shape[2] == 3


def _seeded_batches(args, train_ds, val_ds, net, workers, count):
    import random  # pylint: disable=import-outside-toplevel
    random.seed(3)
    np.random.seed(3)
    train_data, _ = get_dataloader(net, train_ds, val_ds, 128, 4, workers, args)
    return [[a.asnumpy() for a in b] + [b[0].context] for _, b in zip(range(count), train_data)]


def test_fast_loader_gives_the_reference_loaders_batches(voc_root):
    """Decoded by cv2, transformed in numpy, batched in one buffer: GluonCV's arrays (one
    shape: the random-shape loader only picks among such transforms, 10 of them per loader
    to build, about 20 s here; bench/yolo3_pipeline.py compares that one)."""
    import mxnet as mx  # pylint: disable=import-outside-toplevel
    args, train_ds, val_ds, _, net = _setup(voc_root)
    ref_args = _setup(voc_root, '--reference-transform')[0]
    ours = _seeded_batches(args, train_ds, val_ds, net, 0, 3)
    ref = _seeded_batches(ref_args, train_ds, val_ds, net, 0, 3)
    for o, r in zip(ours, ref):
        assert [a.shape for a in o[:7]] == [a.shape for a in r[:7]]
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(o[:7], r[:7]))
        assert o[7] == mx.cpu() and r[7] == mx.Context('cpu_shared', 0)


@pytest.mark.parametrize('dataset', ['voc', 'coco'])
def test_fast_loader_blends_mixup_in_numpy_with_the_reference_loaders_batches(
        voc_root, coco_root, dataset):
    """--mixup on the fast path: the numpy blend of the numpy images (the same draws and
    bytes as GluonCV's NDArray blend), switched by the recipe's SharedMixupDetection."""
    from gluontrain.mx.yolo3.data import opencv_decoded  # noqa: E501  pylint: disable=import-outside-toplevel
    from gluontrain.yolo3.data import MixupDetection as NumpyMixup  # noqa: E501  pylint: disable=import-outside-toplevel
    root = voc_root if dataset == 'voc' else coco_root
    args, train_ds, val_ds, _, net = _setup(root, '--dataset', dataset, '--mixup')
    ref_args = _setup(root, '--dataset', dataset, '--mixup', '--reference-transform',
                      '--reference-mixup')[0]
    assert isinstance(opencv_decoded(train_ds), NumpyMixup)
    train_ds.set_mixup(np.random.beta, 1.5, 1.5)  # reaches the numpy blend (shared switch)
    ours = _seeded_batches(args, train_ds, val_ds, net, 0, 3)
    ref = _seeded_batches(ref_args, train_ds, val_ds, net, 0, 3)
    mixed = 0
    for o, r in zip(ours, ref):
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(o[:7], r[:7]))
        mixed += int(((o[1] > 0) & (o[1] < 0.999)).sum())
    assert mixed > 0  # some boxes carry a mixup weight


def test_fast_loader_workers_send_shared_batches(voc_root):
    import mxnet as mx  # pylint: disable=import-outside-toplevel
    args, train_ds, val_ds, _, net = _setup(voc_root)
    batches = _seeded_batches(args, train_ds, val_ds, net, 2, 3)
    n = 3 * sum((128 // s) ** 2 for s in (32, 16, 8))
    for b in batches:
        assert [a.shape for a in b[:6]] == [(4, 3, 128, 128), (4, n, 1), (4, n, 2), (4, n, 2),
                                            (4, n, 2), (4, n, 20)]
        assert b[7] == mx.cpu()  # mapped from the worker's memfd (GluonCV's: cpu_shared)
        assert (b[6][:, :, :1] >= 0).any(axis=1).all()  # every image has a box, padded by -1


def _coco_setup(coco_root, *extra):
    return _setup(coco_root, '--dataset', 'coco', *extra)


def test_coco_metric_batched_equals_gluoncvs_metric(tmp_path):
    """GluonCV's batched update (NDArray lists, one per context) into the shared metric gives
    GluonCV's table on the same numpy reader; --reference-metric picks GluonCV's own."""
    import mxnet as mx  # pylint: disable=import-outside-toplevel
    from gluoncv.utils.metrics.coco_detection import COCODetectionMetric  # noqa: E501  pylint: disable=import-outside-toplevel
    from fixtures import make_coco_metric_fixture as fixture  # noqa: E501  pylint: disable=import-outside-toplevel
    from gluontrain.mx.yolo3.data import COCOMetric, coco_metric  # noqa: E501  pylint: disable=import-outside-toplevel
    root = fixture.write_dataset(str(tmp_path / 'coco'))
    dets = fixture.detections(root)
    tables = []
    for metric in (COCOMetric(fixture_val(root), data_shape=fixture.DATA_SHAPE),
                   COCODetectionMetric(fixture_val(root), str(tmp_path / 'eval'), cleanup=True,
                                       data_shape=fixture.DATA_SHAPE)):
        for start in range(0, len(dets), 4):
            arrays = [np.stack([d[k] for d in dets[start:start + 4]]) for k in range(3)]
            boxes, scores, labels = [[mx.nd.array(a[:2]), mx.nd.array(a[2:])] for a in arrays]
            metric.update(boxes, labels, scores, None, None, None)
        tables.append(metric.get())
    assert tables[0] == tables[1]
    assert float(tables[0][1][-1]) == pytest.approx(27.6, abs=0.11)  # the recorded table's
    args = parse_args(['--dataset', 'coco', '--gpus', '', '--save-prefix',
                       str(tmp_path / 'new' / 'p')])
    assert type(coco_metric(fixture_val(root), args)) is COCOMetric
    args.reference_metric = True
    assert type(coco_metric(fixture_val(root), args)) is COCODetectionMetric
    assert os.path.isdir(str(tmp_path / 'new'))  # gluoncv opens its json at once


def fixture_val(root):
    from gluontrain.yolo3.coco import COCODetection  # pylint: disable=import-outside-toplevel
    return COCODetection(root, 'instances_val2017', skip_empty=False)


def test_coco_fast_loader_gives_the_reference_loaders_batches(coco_root):
    """COCO through the shared numpy reader: NDArray images for GluonCV's transform, numpy
    for the fast one; the same batches (labels of 5 columns, crowd regions dropped)."""
    args, train_ds, val_ds, metric, net = _coco_setup(coco_root)
    ref_args = _coco_setup(coco_root, '--reference-transform')[0]
    assert len(train_ds) == len(train_ds.dataset.items) and len(val_ds) == 6
    ours = _seeded_batches(args, train_ds, val_ds, net, 0, 2)
    ref = _seeded_batches(ref_args, train_ds, val_ds, net, 0, 2)
    for o, r in zip(ours, ref):
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(o[:7], r[:7]))
    assert type(metric).__name__ == 'COCOMetric'


def test_rec_fast_loader_gives_the_reference_loaders_batches(tmp_path):
    """--dataset rec on MXNet: the numpy RecordIO reader, NDArray images for GluonCV's
    transform, numpy for the fast one; the same batches."""
    from gluontrain.data.records import write_records  # noqa: E501  pylint: disable=import-outside-toplevel
    root = write_records(str(tmp_path / 'rec'), 'rec', classes=['car', 'dog'], num_train=8,
                         num_val=4, seed=1, image_size=(96, 128), max_objects=3)
    args, train_ds, val_ds, metric, net = _setup(root, '--dataset', 'rec', '--classes',
                                                 'car,dog')
    ref_args = _setup(root, '--dataset', 'rec', '--classes', 'car,dog',
                      '--reference-transform')[0]
    assert len(train_ds) == 8 and len(val_ds) == 4 and metric.num == 3  # 2 classes + mAP
    ours = _seeded_batches(args, train_ds, val_ds, net, 0, 2)
    ref = _seeded_batches(ref_args, train_ds, val_ds, net, 0, 2)
    for o, r in zip(ours, ref):
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(o[:7], r[:7]))
