"""Arguments: the reference's names and defaults, and up-front refusals."""
import mxnet as mx
import pytest

from gluontrain.mx.yolo3 import check_args, parse_args

# train_yolo3.py (gluoncv 0.10.5) defaults, typed from the reference's parse_args
REFERENCE_DEFAULTS = dict(
    network='darknet53', data_shape=416, batch_size=64, dataset='voc', num_workers=4, gpus='0',
    epochs=200, resume='', start_epoch=0, lr=0.001, lr_mode='step', lr_decay=0.1,
    lr_decay_period=0, lr_decay_epoch='160,180', warmup_lr=0.0, warmup_epochs=0, momentum=0.9,
    wd=0.0005, log_interval=100, save_prefix='', save_interval=10, val_interval=1, seed=233,
    num_samples=-1, syncbn=False, no_random_shape=False, no_wd=False, mixup=False,
    no_mixup_epochs=20, label_smooth=False, amp=False, horovod=False)


def test_every_reference_argument_keeps_its_name_and_default():
    args = vars(parse_args([]))
    for name, default in REFERENCE_DEFAULTS.items():
        assert args[name] == default, name
    assert parse_args(['-j', '2']).num_workers == 2


def test_added_arguments_default_to_reference_behaviour():
    args = parse_args([])
    assert (args.dataset_root, args.cpus, args.no_pretrained_base, args.reference_mixup,
            args.load_weights) == (None, 0, False, False, '')


def test_unknown_dataset_is_refused():
    with pytest.raises(SystemExit, match="--dataset 'kitti' is not supported"):
        parse_args(['--dataset', 'kitti'])


def _check(argv, ctx):
    check_args(parse_args(argv), ctx)


def test_syncbn_on_cpu_contexts_is_refused_not_deadlocked():
    with pytest.raises(ValueError, match='SyncBatchNorm deadlocks'):
        _check(['--syncbn'], [mx.cpu(0), mx.cpu(1)])
    _check(['--syncbn'], [mx.cpu(0)])  # one context: plain BatchNorm, as the reference


def test_amp_on_cpu_and_network_are_refused():
    with pytest.raises(ValueError, match='--amp needs GPUs'):
        _check(['--amp'], [mx.cpu()])
    with pytest.raises(ValueError, match="--network 'resnet50' is not a YOLOv3 base network"):
        _check(['--network', 'resnet50'], [mx.cpu()])
    with pytest.raises(ValueError, match='smaller than the 2 contexts'):
        _check(['--batch-size', '1'], [mx.cpu(0), mx.cpu(1)])


def test_horovod_global_batch_must_split_over_the_processes():
    from gluontrain.core.distributed import LocalComm
    comm = LocalComm()
    comm.world_size = 4
    with pytest.raises(ValueError, match='--batch-size 6 is the global batch of 4 Horovod'):
        check_args(parse_args(['--horovod', '--batch-size', '6']), [mx.cpu()], comm)
    check_args(parse_args(['--horovod', '--batch-size', '8']), [mx.cpu()], comm)

