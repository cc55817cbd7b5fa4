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


@pytest.mark.parametrize('argv, words', [
    (['--channels-last'], '--channels-last is a --backend torch switch: the Gluon convolutions'),
    (['--cudnn-benchmark'], 'MXNET_CUDNN_AUTOTUNE_DEFAULT=1'),
    (['--amp', '--amp-dtype', 'bfloat16'], "--amp-dtype bfloat16 is a --backend torch switch: "
                                           "MXNet AMP here is GluonCV's float16"),
])
def test_torch_only_switches_are_one_error_line_on_mxnet(argv, words, capsys):
    """Issue 44: the shared parser has switches only the torch backend honours; the MXNet
    recipe refuses each before anything is built (on a GPU context too: the backend, not the
    device, lacks them), and the CLI says so in one ``error:`` line."""
    with pytest.raises(ValueError, match='drop it or add --backend torch'):
        _check(argv, [mx.gpu(0)])
    from gluontrain.__main__ import main as cli  # pylint: disable=import-outside-toplevel
    assert cli(['train', 'yolo3', '--gpus', ''] + argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('error: ') and words in err[0], err
    # float16, the default, is MXNet AMP's own type: accepted on GPUs
    _check(['--amp', '--amp-dtype', 'float16'], [mx.gpu(0)])


def test_horovod_global_batch_must_split_over_the_processes():
    from gluontrain.core.distributed import LocalComm
    comm = LocalComm()
    comm.world_size = 4
    with pytest.raises(ValueError, match='--batch-size 6 is the global batch of 4 Horovod'):
        check_args(parse_args(['--horovod', '--batch-size', '6']), [mx.cpu()], comm)
    check_args(parse_args(['--horovod', '--batch-size', '8']), [mx.cpu()], comm)



# ----- issue 21: impossible values refused while parsing or before anything is built

@pytest.mark.parametrize('argv, message', [
    (['--batch-size', '0'], 'argument --batch-size: 0 trains nothing'),
    (['--epochs', '-1'], 'argument --epochs: -1 trains nothing'),
    # the reference divides by it: (epoch + 1) % val_interval
    (['--val-interval', '0'], 'argument --val-interval: 0 is not an interval (the reference '
                              'validates when (epoch + 1) % val_interval == 0: 0 divides by '
                              'zero; a value above --epochs never validates); give an integer '
                              '>= 1'),
    (['--val-interval', '-2'], 'argument --val-interval: -2 is not an interval'),
    (['--log-interval', '-1'], 'argument --log-interval: -1 is negative; give an integer >= 0'),
    (['--save-interval', '-10'], 'argument --save-interval: -10 is negative'),
    (['--num-workers', '-1'], 'argument --num-workers/-j: -1 is negative'),
    (['--start-epoch', '-3'], 'argument --start-epoch: -3 is negative'),
    (['--cpus', '-2'], 'argument --cpus: -2 is negative'),
    (['--warmup-epochs', '-1'], 'argument --warmup-epochs: -1 is negative'),
    (['--lr-decay-period', '-1'], 'argument --lr-decay-period: -1 is negative'),
    (['--no-mixup-epochs', '-1'], 'argument --no-mixup-epochs: -1 is negative'),
    (['--momentum', 'inf'], 'argument --momentum: inf is not a finite number >= 0'),
    (['--wd', '-0.1'], 'argument --wd: -0.1 is not a finite number >= 0'),
    (['--lr-decay', 'nan'], 'argument --lr-decay: nan is not a finite number >= 0'),
    (['--seed', '-1'], 'argument --seed: -1 is negative'),
    (['--data-shape', '320000'], 'argument --data-shape: 320000 is above 4096 (one 4096 x 4096 '
                                 'float image is already 0.2 GB); use a multiple of 32 up to '
                                 '4096'),
])
def test_impossible_values_are_one_usage_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_zero_log_and_save_intervals_keep_the_reference_meaning():
    # the reference: "if args.log_interval and ...", "if save_interval and ..."
    args = parse_args(['--log-interval', '0', '--save-interval', '0'])
    assert (args.log_interval, args.save_interval) == (0, 0)


def test_runs_that_train_nothing_are_refused():
    with pytest.raises(ValueError, match='--start-epoch 5 is not below --epochs 5'):
        _check(['--start-epoch', '5', '--epochs', '5'], [mx.cpu()])
    with pytest.raises(ValueError, match='--num-samples 0: give the number of training images'):
        _check(['--num-samples', '0'], [mx.cpu()])
    _check(['--num-samples', '-1'], [mx.cpu()])


def test_save_prefix_under_an_existing_file_is_one_line(tmp_path):
    f = tmp_path / 'taken'
    f.write_text('x')
    with pytest.raises(ValueError, match=r'--save-prefix .*taken/run_: .*taken is an existing '
                                         r'file, not a folder'):
        _check(['--save-prefix', str(f / 'run_')], [mx.cpu()])
    with pytest.raises(ValueError, match=r'--model-dir .*taken: .*is an existing file'):
        _check(['--model-dir', str(f)], [mx.cpu()])
    _check(['--save-prefix', str(tmp_path / 'new' / 'run_')], [mx.cpu()])


@pytest.mark.parametrize('flag', ['--resume', '--load-weights'])
def test_weights_folder_is_refused_before_the_data_is_read(tmp_path, flag):
    from gluontrain.mx.yolo3.recipe import main
    with pytest.raises(FileNotFoundError, match=r'^{} .* is a folder, not a file; pass a '
                                                r'.params file'.format(flag)):
        main(['--gpus', '', flag, str(tmp_path), '--dataset-root', str(tmp_path / 'none')])


def test_pretrained_base_file_is_checked_before_the_data_is_read(tmp_path):
    """--pretrained-base FILE: absent, a folder, beside --no-pretrained-base or --transfer (which
    brings its own base) is one line naming the argument, before any data is read."""
    from gluontrain.mx.yolo3.recipe import main
    base = ['--gpus', '', '--dataset-root', str(tmp_path / 'none'), '--pretrained-base']
    cases = [
        ([str(tmp_path / 'absent.params')], FileNotFoundError,
         r'^--pretrained-base .*absent\.params does not exist; give the \.params file of a '
         r'base network, or drop the argument$'),
        ([str(tmp_path)], FileNotFoundError, r'^--pretrained-base .* is a folder, not a file'),
        ([str(tmp_path / 'b.params'), '--no-pretrained-base'], ValueError,
         r'^--pretrained-base .*b\.params and --no-pretrained-base contradict each other'),
        ([str(tmp_path / 'b.params'), '--transfer', 'yolo3_mobilenet1.0_coco'], ValueError,
         r'^--pretrained-base .*b\.params with --transfer yolo3_mobilenet1\.0_coco: the '
         r'transferred model gives the base too'),
    ]
    for extra, error, message in cases:
        with pytest.raises(error, match=message):
            main(base + extra)
