"""gluontrain.torch.yolo3.recipe: the whole recipe on tiny data, its files, its resume, the
--backend route and the one-line refusals."""
import json
import os
import subprocess
import sys

import pytest
import torch

from gluontrain.__main__ import main as cli
from gluontrain.data import synthetic
from gluontrain.registry import get_recipe, route
from gluontrain.torch.yolo3 import get_yolov3, load_params, main, recipe
from gluontrain.torch.yolo3.infer import eval_main


@pytest.fixture(scope='module')
def tiny_voc(tmp_path_factory):
    return synthetic.write_voc(str(tmp_path_factory.mktemp('tinyvoc')), num_train=3, num_val=2,
                               seed=0, years=(2007, 2012), classes=None, image_size=(64, 96),
                               max_objects=3)


def _argv(root, out, *more):
    return ['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root', root,
            '--gpus', '', '--no-pretrained-base', '--data-shape', '64', '--no-random-shape',
            '--batch-size', '2', '-j', '0', '--log-interval', '1', '--save-interval', '1',
            '--save-prefix', out + os.sep] + list(more)


def test_trains_writes_gluoncv_files_and_resumes_exactly(tiny_voc, tmp_path):
    out = str(tmp_path / 'a')
    state = main(_argv(tiny_voc, out, '--epochs', '2', '--mixup', '--no-mixup-epochs', '0',
                       '--label-smooth', '--no-wd', '--warmup-epochs', '1'))
    prefix = os.path.join(out, 'yolo3_mobilenet0.25_voc')
    assert state.iteration == 6  # 6 train images, batch 2, rollover: 3 batches a epoch
    log = open(prefix + '_train.log').read()
    assert log.count('[Batch ') == 6 and 'ObjLoss=' in log and 'mAP=' in log
    rows = [json.loads(line) for line in open(prefix + '_metrics.jsonl')]
    assert [r['epoch'] for r in rows if 'epoch' in r][-1] == 1
    # the interval weights are GluonCV .params that load into the network, 0 missing
    interval = sorted(f for f in os.listdir(out) if f.endswith('.params'))
    assert interval and interval[0].startswith('yolo3_mobilenet0.25_voc_0000_')
    report = load_params(get_yolov3('yolo3_mobilenet0.25_voc'), os.path.join(out, interval[0]))
    assert len(report.loaded) == report.total == 247 and not report.missing
    # a 3-epoch run equals the 2-epoch run resumed for a third epoch
    full = main(_argv(tiny_voc, str(tmp_path / 'b'), '--epochs', '3', '--mixup',
                      '--no-mixup-epochs', '0', '--label-smooth', '--no-wd', '--warmup-epochs',
                      '1'))
    resumed = main(_argv(tiny_voc, str(tmp_path / 'c'), '--epochs', '3', '--mixup',
                         '--no-mixup-epochs', '0', '--label-smooth', '--no-wd',
                         '--warmup-epochs', '1', '--resume', prefix + '_last.ckpt'))
    assert resumed.iteration == full.iteration == 9
    tail = [line.split('Speed')[1].split(',', 1)[1] for line in
            open(str(tmp_path / 'b' / 'yolo3_mobilenet0.25_voc_train.log')) if '[Epoch 2][Batch' in line]
    again = [line.split('Speed')[1].split(',', 1)[1] for line in
             open(str(tmp_path / 'c' / 'yolo3_mobilenet0.25_voc_train.log')) if '[Epoch 2][Batch' in line]
    assert tail and tail == again


def test_no_plots_draws_no_picture(tiny_voc, tmp_path):
    out = str(tmp_path / 'p')
    main(_argv(tiny_voc, out, '--epochs', '1'))
    assert {'yolo3_mobilenet0.25_voc_curves.png', 'yolo3_mobilenet0.25_voc_val_samples.png'} <= \
        set(os.listdir(out))
    bare = str(tmp_path / 'n')
    main(_argv(tiny_voc, bare, '--epochs', '1', '--no-plots'))
    written = set(os.listdir(bare))
    assert not [f for f in written if f.endswith('.png')]
    assert {'yolo3_mobilenet0.25_voc_metrics.jsonl', 'yolo3_mobilenet0.25_voc_last.ckpt'} <= written


@pytest.mark.slow  # two 2-process jobs
def test_cpus_2_starts_two_processes_that_equal_the_torchrun_job(tiny_voc, tmp_path):
    # GluonCV's user types --gpus 0,1,2,3 (here the CPU twin, --cpus 2): the script starts one
    # process per device itself; the losses it logs are the torchrun job's, line for line
    from launch import dist_env, torchrun  # tests/launch.py
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))), 'scripts', 'train_yolov3.py')
    common = ['--backend', 'torch', '--epochs', '2', '--batch-size', '4']
    own = subprocess.run([sys.executable, script] + _argv(tiny_voc, str(tmp_path / 'own')) +
                         common + ['--cpus', '2'], capture_output=True, text=True,
                         env=dist_env(), timeout=600, check=False)
    assert own.returncode == 0, own.stderr[-3000:]
    ran = torchrun(script, _argv(tiny_voc, str(tmp_path / 'tr')) + common, nproc=2)
    assert ran.returncode == 0, ran.stderr[-3000:]

    def losses(folder):
        with open(os.path.join(str(tmp_path), folder, 'yolo3_mobilenet0.25_voc_train.log')) as f:
            return [line.split('Speed')[1].split(',', 1)[1] if 'Speed' in line
                    else line.split('cost: ')[1].split(',', 1)[1] if 'cost: ' in line else line
                    for line in f if '[Epoch' in line or 'mAP=' in line]

    mine = losses('own')
    assert mine and mine == losses('tr')
    assert sum('[Batch' in line or 'ObjLoss' in line for line in mine) >= 4
    assert own.stdout.count('final validation mAP') == 1  # rank 0 speaks for the job


def test_backend_route_and_registry():
    assert route('yolo3', ['--backend', 'torch']) == 'yolo3-torch'
    assert route('yolo3', ['--backend=torch', '--backend', 'mxnet']) == 'yolo3'
    assert route('yolo3', []) == 'yolo3' and route('ssd', ['--backend', 'torch']) == 'ssd'
    assert get_recipe('yolo3-torch').main is main


@pytest.mark.parametrize('extra, words', [
    (['--amp'], '--amp needs GPUs for float16'),
    (['--amp-dtype', 'bfloat16'], 'chooses the type of --amp, which is off: add --amp'),
    (['--cudnn-benchmark'], '--cudnn-benchmark tunes cuDNN, which only GPUs have'),
    (['--horovod'], 'torchrun'),
    (['--cpus', '3', '--batch-size', '2'], 'must be a multiple'),
    (['--reference-metric'], 'MXNet'),
    (['--model-dir', 'x'], 'torch.onnx'),
])
def test_what_torch_cannot_honour_is_one_line(tiny_voc, tmp_path, capsys, extra, words):
    argv = _argv(tiny_voc, str(tmp_path)) + extra + ['--backend', 'torch']
    assert cli(['train', 'yolo3'] + argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


def test_a_nan_left_on_the_device_is_read_before_any_file_is_written(tiny_voc, tmp_path):
    """Issue 44: the losses stay on the device between log lines. With ``--log-interval 0``
    the NaN of ``--lr 1e12`` (from the second step on) is read at the pass's last batch: the
    run stops there, before the epoch's hooks, so no checkpoint, weights or validation."""
    out = str(tmp_path / 'nan')
    with pytest.raises(FloatingPointError, match=r'non-finite loss at epoch 0 batch 2 '
                       r'\(iteration 3; read every \(no\) steps and at the end of each pass: '
                       r'non-finite at this step or one of the steps since iteration 1\)'):
        main(_argv(tiny_voc, out, '--epochs', '2', '--lr', '1e12', '--log-interval', '0'))
    assert not [f for f in os.listdir(out) if f.endswith(('.ckpt', '.params'))]
    log = open(os.path.join(out, 'yolo3_mobilenet0.25_voc_train.log')).read()
    assert 'Training stopped: non-finite loss' in log and 'Validation' not in log


def test_cudnn_benchmark_is_on_for_the_run_and_restored_after(tiny_voc, tmp_path,
                                                              monkeypatch):
    """``--cudnn-benchmark`` (GPUs; refused on the CPU above) sets
    ``torch.backends.cudnn.benchmark`` for the run and puts it back after: checked here with
    the CPU refusal lifted (``cpu=False``, as on a GPU) and the loop replaced."""
    from gluontrain.core.loop import TrainState  # pylint: disable=import-outside-toplevel
    real_check, seen = recipe.check_common, []
    monkeypatch.setattr(recipe, 'check_common', lambda args, cpu, *a: real_check(args, False, *a))
    monkeypatch.setattr(recipe, 'fit', lambda *a, **k: seen.append(
        torch.backends.cudnn.benchmark) or TrainState())
    before = torch.backends.cudnn.benchmark
    main(_argv(tiny_voc, str(tmp_path), '--epochs', '1', '--no-plots', '--cudnn-benchmark'))
    main(_argv(tiny_voc, str(tmp_path), '--epochs', '1', '--no-plots'))
    assert seen == [True, before] and torch.backends.cudnn.benchmark is before


def test_pretrained_base_is_loaded_and_reported_in_the_log(tiny_voc, tmp_path, monkeypatch):
    """GluonCV's default: the ImageNet base from the model store ($MXNET_HOME/models; the
    address a closed port, so nothing is downloaded), its report at the head of the log; a
    missing base is one line saying where to put it."""
    from yolo3_torch_support import base_arrays  # pylint: disable=import-outside-toplevel
    from gluontrain.core import model_store, mxparams  # pylint: disable=import-outside-toplevel
    monkeypatch.setenv('MXNET_HOME', str(tmp_path / 'home'))
    monkeypatch.setenv('MXNET_GLUON_REPO', 'http://127.0.0.1:9/')
    argv = [a for a in _argv(tiny_voc, str(tmp_path / 'run')) if a != '--no-pretrained-base']
    base = model_store.params_path('mobilenet0.25')
    with pytest.raises(ValueError, match='is not on this machine.*--no-pretrained-base'):
        main(argv + ['--epochs', '1'])
    os.makedirs(os.path.dirname(base), exist_ok=True)  # (the failed fetch made it)
    mxparams.write_params(base, base_arrays('mobilenet0.25'))
    main(argv + ['--epochs', '1', '--no-plots'])
    log = open(str(tmp_path / 'run' / 'yolo3_mobilenet0.25_voc_train.log')).read()
    assert 'pretrained base: loaded 135 of 135 tensors from {} (0 missing, 2 unexpected'.format(
        base) in log


@pytest.mark.slow  # two scripts in subprocesses, each importing torch (12 s)
def test_coco_trains_validates_and_prints_gluoncvs_table(tmp_path):
    scripts = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'scripts')
    root, out = str(tmp_path / 'coco'), str(tmp_path / 'run')
    subprocess.run([sys.executable, os.path.join(scripts, 'make_synthetic_data.py'), 'coco',
                    '--root', root, '--num-train', '8', '--num-val', '4'], check=True,
                   capture_output=True)
    argv = [a if a != 'voc' else 'coco' for a in _argv(root, out, '--epochs', '1', '--mixup',
                                                        '--no-mixup-epochs', '0')]
    done = subprocess.run([sys.executable, os.path.join(scripts, 'train_yolov3.py'),
                           '--backend', 'torch'] + argv, capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert done.returncode == 0, done.stderr[-2000:]
    text = done.stdout
    table = text[text.index('[Epoch 0] Validation:'):]
    assert table.count('Average Precision  (AP) @[') == 6
    assert table.count('Average Recall     (AR) @[') == 6
    assert '\nperson=' in table and '\ntoothbrush=' in table
    mean = table.split('~~~~ MeanAP @ IoU=[0.50,0.95] ~~~~\n=')[1].split()[0]
    assert 'final validation ~~~~ MeanAP @ IoU=[0.50,0.95] ~~~~: ' + mean in text
    # the epoch's .params, evaluated by eval_yolov3.py, give the table the training printed
    params = [f for f in os.listdir(out) if f.endswith('.params') and '_0000_' in f]
    assert params == ['yolo3_mobilenet0.25_coco_0000_{:.4f}.params'.format(float(mean))]
    names, values = eval_main(['--network', 'mobilenet0.25', '--dataset', 'coco',
                               '--dataset-root', root, '--data-shape', '64', '--gpus', '',
                               '--params', os.path.join(out, params[0]), '--batch-size', '2'])
    assert values[-1] == mean and values[0] in table


def _batch_lines(path, epoch):
    return [line.split('Speed')[1].split(',', 1)[1] for line in open(path)
            if '[Epoch {}][Batch'.format(epoch) in line]


def test_transfer_resets_classes_logs_the_reuse_and_resumes_exactly(tiny_voc, tmp_path):
    from gluontrain.torch.yolo3.recipe import gluon_init  # noqa: E501  pylint: disable=import-outside-toplevel
    from gluontrain.torch.yolo3.weights import save_params  # noqa: E501  pylint: disable=import-outside-toplevel
    torch.manual_seed(5)
    other = str(tmp_path / 'other.params')
    save_params(gluon_init(get_yolov3('yolo3_mobilenet0.25_custom', ['x', 'person', 'dog'])),
                other)
    argv = ['--transfer', other, '--transfer-classes', 'x,person,dog', '--warmup-epochs', '1']
    full = main(_argv(tiny_voc, str(tmp_path / 'full'), '--epochs', '2', *argv))
    log = str(tmp_path / 'full' / 'yolo3_mobilenet0.25_voc_train.log')
    lines = open(log).read().splitlines()
    assert any(line.startswith('loaded 247 of 247 tensors from ' + other) for line in lines)
    assert ('reset_class: 20 classes (aeroplane,bicycle,bird,boat,bottle,bus,car,cat,chair,cow,'
            'diningtable,dog,horse,motorbike,person,pottedplant,sheep,sofa,train,tvmonitor) '
            'from {} (3 classes); class rows reused: dog <- dog, person <- person; box and '
            'objectness rows reused'.format(other)) in lines
    first = main(_argv(tiny_voc, str(tmp_path / 'first'), '--epochs', '1', *argv))
    resumed = main(_argv(tiny_voc, str(tmp_path / 'res'), '--epochs', '2', '--resume',
                         str(tmp_path / 'first' / 'yolo3_mobilenet0.25_voc_last.ckpt'), *argv))
    assert first.iteration == 3 and resumed.iteration == full.iteration == 6
    again = str(tmp_path / 'res' / 'yolo3_mobilenet0.25_voc_train.log')
    assert _batch_lines(log, 1) and _batch_lines(log, 1) == _batch_lines(again, 1)
    assert _batch_lines(log, 0) == _batch_lines(
        str(tmp_path / 'first' / 'yolo3_mobilenet0.25_voc_train.log'), 0)


@pytest.mark.parametrize('extra, words', [
    (['--transfer', 'yolo3_darknet53_coco'], 'is a darknet53 YOLOv3: pass --network darknet53'),
    (['--transfer', 'nowhere.params'], '--transfer nowhere.params'),
    (['--transfer', 'yolo3_resnet_voc'], '--transfer yolo3_resnet_voc'),
    (['--transfer', __file__], 'with --transfer-classes a,b,c'),
    (['--transfer', __file__, '--load-weights', __file__], 'give one of them'),
])
def test_a_transfer_that_cannot_work_is_one_line(tiny_voc, tmp_path, capsys, extra, words):
    assert cli(['train', 'yolo3'] + _argv(tiny_voc, str(tmp_path)) + extra +
               ['--backend', 'torch']) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err


def test_reuse_classes_must_be_pairs(capsys):
    from gluontrain.yolo3.args import parse_args  # pylint: disable=import-outside-toplevel
    assert parse_args(['--reuse-classes', 'car:car,1:truck']).reuse_classes == 'car:car,1:truck'
    with pytest.raises(SystemExit):
        parse_args(['--reuse-classes', 'car:car,x'])
    assert "argument --reuse-classes: 'x' is not a new:old pair" in capsys.readouterr().err


def test_importing_the_torch_recipe_imports_no_mxnet():
    code = ('import sys, gluontrain.torch.yolo3, gluontrain.yolo3.data; '
            'print(sorted(m for m in sys.modules if m.split(".")[0] in ("mxnet", "gluoncv")))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == '[]'


CUSTOM_ANCHORS = '4,6,8,12,16,10;12,24,24,16,24,40;40,30,48,56,64,60'


def test_custom_anchors_train_save_reload_and_evaluate_the_same(tiny_voc, tmp_path, capsys):
    # pylint: disable=import-outside-toplevel
    from gluontrain.core.mxparams import read_params
    from gluontrain.torch.yolo3.data import network_layout
    from gluontrain.torch.yolo3.infer import load_net
    from gluontrain.torch.yolo3.recipe import get_net
    from gluontrain.yolo3.anchors import GLUONCV_ANCHORS_TEXT, anchors_text, file_anchors
    from gluontrain.yolo3.args import parse_args
    out = str(tmp_path / 'run')
    # the network, hence the targets, are built with --anchors
    args = parse_args(_argv(tiny_voc, out, '--anchors', CUSTOM_ANCHORS))
    net, _ = get_net(args, [torch.device('cpu')])
    layout = network_layout(net, 64, 64)
    assert anchors_text(layout['anchors'][::-1]) == CUSTOM_ANCHORS  # heads run deep first
    state = main(_argv(tiny_voc, out, '--epochs', '1', '--no-plots', '--anchors',
                       CUSTOM_ANCHORS))
    params = [os.path.join(out, f) for f in os.listdir(out) if '_0000_' in f]
    assert len(params) == 1 and file_anchors(read_params(params[0])) == CUSTOM_ANCHORS
    capsys.readouterr()
    # eval takes the anchors from the file and gives the training's last validation
    names, values = eval_main(['--network', 'mobilenet0.25', '--dataset', 'voc',
                               '--dataset-root', tiny_voc, '--data-shape', '64', '--gpus', '',
                               '--params', params[0], '--batch-size', '2'])
    assert 'anchors (from the file): ' + CUSTOM_ANCHORS in capsys.readouterr().out
    want_names, want = state.scores['val']
    assert list(names) == list(want_names) and str(values) == str(want)
    # ... with the detections of a network built with --anchors, not those of GluonCV's
    x = torch.rand(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        loaded = load_net('mobilenet0.25', 'voc', None, torch.device('cpu'), params[0])
        from_file = loaded.detections(x)
        same = get_yolov3('yolo3_mobilenet0.25_voc', anchors=CUSTOM_ANCHORS).eval()
        load_params(same, params[0], anchors='same')
        gluoncvs = get_yolov3('yolo3_mobilenet0.25_voc').eval()
        load_params(gluoncvs, params[0], anchors='network')
        assert torch.equal(from_file, same.detections(x))
        # (compared as anchors, not boxes: one epoch on 6 images may leave exp() at inf with
        # either anchors, e.g. under numpy 2's OpenCV, where both give the same inf boxes)
        for a, b, g in zip(loaded.yolo_outputs, same.yolo_outputs, gluoncvs.yolo_outputs):
            assert torch.equal(a.anchors, b.anchors) and not torch.equal(a.anchors, g.anchors)
    assert file_anchors(gluoncvs.state_dict()) == GLUONCV_ANCHORS_TEXT
    # training from it, or resuming it, with other anchors is one line naming both
    for extra in (['--load-weights', params[0]],
                  ['--resume', os.path.join(out, 'yolo3_mobilenet0.25_voc_last.ckpt')]):
        assert cli(['train', 'yolo3'] + _argv(tiny_voc, str(tmp_path / 'again'), '--epochs',
                                              '2', '--backend', 'torch', *extra)) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and CUSTOM_ANCHORS in err[0] and GLUONCV_ANCHORS_TEXT in err[0], err
    # a transfer keeps --anchors and says the file's differ
    args = parse_args(_argv(tiny_voc, out, '--transfer', params[0], '--transfer-classes',
                            ','.join(names[:-1]), '--classes', 'dog,cat', '--dataset', 'custom'))
    reports = []
    net, _ = get_net(args, [torch.device('cpu')], reports)
    assert file_anchors(net.state_dict()) == GLUONCV_ANCHORS_TEXT
    assert reports[-1] == ("anchors: --anchors {} (GluonCV's) kept; the file's {} not loaded: "
                           'its box rows were trained for them'.format(GLUONCV_ANCHORS_TEXT,
                                                                       CUSTOM_ANCHORS))
