"""The command line: gluontrain train yolo3|ssd / scripts/train_*.py.

Every bad input a user can give ends in exactly one ``error:`` line naming the argument or
file (exit status non-zero) and never a traceback; Ctrl-C ends in one ``interrupted at`` line
with exit status 130.
"""
import errno
import os
import shutil
import signal
import subprocess
import sys
from argparse import Namespace

import pytest

from launch import default_sigint  # tests/launch.py

from gluontrain.__main__ import (EXIT_INTERRUPTED, interrupt_message, main, oserror_message)
from gluontrain.core.loop import TrainState
from gluontrain.registry import list_recipes, recipe_summary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1', MXNET_CPU_WORKER_NTHREADS='1',
           MPLBACKEND='Agg')


def _yolo(prefix, root, *extra, dataset='voc'):
    """A fast CPU run of YOLOv3 (mobilenet0.25, 96 px, batch 4, no workers; was 160 px:
    what these tests check is the command's ending, not the network's numbers; no pictures,
    ~1.4 s of matplotlib per run, which none of them looks at)."""
    return ['train', 'yolo3', '--network', 'mobilenet0.25', '--dataset', dataset,
            '--dataset-root', str(root), '--no-pretrained-base', '--gpus', '',
            '--batch-size', '4', '-j', '0', '--data-shape', '96', '--no-random-shape',
            '--log-interval', '1', '--epochs', '1', '--no-plots',
            '--save-prefix', str(prefix)] + list(extra)


def _ssd(folder, root, *extra):
    """A fast CPU run of SSD300 (VGG at 1/16 width, batch 4, 2 iterations; was 1/8; no
    pictures, which none of these tests looks at)."""
    return ['train', 'ssd', '--dataset_root', str(root), '--basenet', '', '--cuda', 'false',
            '--batch_size', '4', '--num_workers', '0', '--width_mult', '0.0625', '--seed', '0',
            '--max_iter', '2', '--plots', 'false', '--save_folder', str(folder) + '/'] + list(extra)


def _one_error_line(err, *names):
    """The error of ``err``: its single ``error:`` line and what follows it (a dataset error
    lists its problems below), after checking that it names ``names``."""
    assert 'Traceback' not in err, err
    lines = err.splitlines()
    starts = [i for i, line in enumerate(lines) if 'error:' in line]
    assert len(starts) == 1, err
    message = '\n'.join(lines[starts[0]:])
    for name in names:
        assert name in message, (name, message)
    return message


def _fails(argv, capsys, *names):
    """Run the CLI in this process; expect exit status 1 and one error line naming ``names``."""
    assert main(argv) == 1
    line = _one_error_line(capsys.readouterr().err, *names)
    assert line.startswith('error: ')
    return line


def test_usage_for_unknown_recipe(capsys):
    assert main(['train', 'nope']) == 2
    err = capsys.readouterr().err
    assert err.startswith('usage: gluontrain train RECIPE [recipe arguments]')
    assert err.rstrip().endswith("error: unknown recipe 'nope'")


def test_help_lists_every_recipe_in_one_line_without_importing_a_framework():
    code = ('import sys; from gluontrain.__main__ import main; rc = main(["--help"]); '
            'print("imported:", sorted(m for m in ("mxnet", "torch") if m in sys.modules)); '
            'sys.exit(rc)')
    res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=False, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == 'usage: gluontrain train RECIPE [recipe arguments]'
    listed = [line.split()[0] for line in lines[lines.index('recipes:') + 1:-1]]
    assert listed == list_recipes() == ['frcnn', 'sgg', 'sgg-detector', 'ssd', 'yolo3',
                                        'yolo3-torch']
    for name in listed:
        assert recipe_summary(name) and 'scripts/' in recipe_summary(name)
    assert lines[-1] == 'imported: []'


@pytest.mark.parametrize('recipe,argument', [
    ('yolo3', '--network'), ('ssd', '--dataset_root'), ('frcnn', '--log_dir'),
    ('sgg', '--config-file'), ('sgg-detector', '--config-file'), ('yolo3-torch', '--network')])
def test_recipe_help_is_that_recipe_s_arguments_under_the_command_typed(recipe, argument,
                                                                         capsys, monkeypatch):
    assert sorted(list_recipes()) == ['frcnn', 'sgg', 'sgg-detector', 'ssd', 'yolo3',
                                      'yolo3-torch']
    monkeypatch.setattr(sys, 'argv', ['/venv/bin/gluontrain', 'train', recipe, '--help'])
    with pytest.raises(SystemExit) as info:
        main()  # argv from sys.argv, as the console script runs it
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith('usage: gluontrain train {} [-h]'.format(recipe)), out[:200]
    assert argument in out
    assert sys.argv[0] == '/venv/bin/gluontrain'  # restored


def test_scripts_keep_their_own_name_in_the_usage(capsys, monkeypatch):
    monkeypatch.setattr(sys, 'argv', ['scripts/train_ssd.py', '--help'])
    with pytest.raises(SystemExit):
        main(['train', 'ssd', '--help'])  # what scripts/train_ssd.py does
    assert capsys.readouterr().out.startswith('usage: train_ssd.py [-h]')


def test_bad_input_exits_1_with_a_message(capsys, tmp_path):
    code = main(['train', 'yolo3', '--gpus', '', '--network', 'mobilenet0.25',
                 '--no-pretrained-base', '--dataset-root', str(tmp_path / 'missing')])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith('error: ') and 'missing' in err


@pytest.mark.parametrize('argv,names', [
    (['yolo3', '--lr', 'nan'], ['argument --lr: nan is not a finite number >= 0']),
    (['yolo3', '--lr', '-1'], ['argument --lr: -1 is not a finite number >= 0']),
    (['yolo3', '--epochs', '-1'], ['argument --epochs: -1 trains nothing']),
    (['yolo3', '--epochs', '0'], ['argument --epochs: 0 trains nothing']),
    (['yolo3', '--data-shape', '100'],
     ['argument --data-shape: 100 is not a multiple of 32', 'use 96 or 128']),
    (['yolo3', '--lr-decay-epoch', 'a,b'],
     ['argument --lr-decay-epoch:', 'not a comma-separated list of integers']),
    (['yolo3', '--batch-size', '0'], ['argument --batch-size: 0 trains nothing']),
    (['ssd', '--lr', 'nan'], ['argument --lr/--learning-rate: nan is not a finite number']),
    (['ssd', '--max_iter', '0'], ['argument --max_iter: 0 trains nothing']),
    (['ssd', '--lr_steps', '80000,x'], ["argument --lr_steps:", "'x' is not a non-negative"]),
])
def test_impossible_arguments_are_refused_by_argparse_naming_them(argv, names, capsys):
    with pytest.raises(SystemExit) as info:
        main(['train'] + argv)
    assert info.value.code == 2
    _one_error_line(capsys.readouterr().err, *names)


@pytest.mark.parametrize('year,split', [(2007, 'trainval'), (2007, 'test')])
def test_empty_image_list_is_refused_before_training(voc_root, tmp_path, capsys, year, split):
    root = shutil.copytree(voc_root, str(tmp_path / 'VOCdevkit'))
    list_file = os.path.join(root, 'VOC{}'.format(year), 'ImageSets', 'Main', split + '.txt')
    open(list_file, 'w').close()
    _fails(_yolo(str(tmp_path / 'out') + '/', root), capsys, list_file, 'lists no image ids')
    assert not os.path.exists(tmp_path / 'out')  # refused before anything was written
    _fails(_ssd(tmp_path / 'ssd', root), capsys, list_file, 'lists no image ids')


def test_weights_of_another_network_name_the_file(voc_root, tmp_path, capsys):
    import mxnet as mx  # pylint: disable=import-outside-toplevel
    from gluontrain.mx.yolo3 import get_net  # pylint: disable=import-outside-toplevel
    net, _ = get_net(Namespace(network='mobilenet0.25', dataset='custom', classes='a,b',
                               syncbn=False, no_pretrained_base=True), [mx.cpu()])
    net(mx.nd.zeros((1, 3, 64, 64)))  # finishes the deferred initialisation
    other = str(tmp_path / 'two_classes.params')
    net.save_parameters(other)
    for flag in ('--resume', '--load-weights'):
        _fails(_yolo(str(tmp_path / 'out') + '/', voc_root, flag, other), capsys,
               '{} {} holds the weights of another network'.format(flag, other), '--network')
    junk = tmp_path / 'junk.params'
    junk.write_bytes(b'not weights')
    _fails(_yolo(str(tmp_path / 'out') + '/', voc_root, '--load-weights', str(junk)), capsys,
           str(junk), 'is not an MXNet .params file')


def test_ssd_weights_of_another_network_and_the_resume_hint(voc_root, tmp_path, capsys):
    first = tmp_path / 'first'
    assert main(_ssd(first, voc_root, '--max_iter', '1')) == 0
    capsys.readouterr()
    weights = str(first / 'VOC.pth')
    _fails(_ssd(tmp_path / 'wide', voc_root, '--width_mult', '0.25', '--resume', weights),
           capsys, weights, 'loaded 12 of 71 tensors', 'wrong shape')
    # the file's content decides, not its name: weights named like a checkpoint load as weights
    renamed = str(tmp_path / 'weights.ckpt')
    shutil.copy(weights, renamed)
    assert main(_ssd(tmp_path / 'again', voc_root, '--resume', renamed)) == 0
    capsys.readouterr()
    junk = tmp_path / 'junk.ckpt'
    junk.write_text('not weights')
    line = _fails(_ssd(tmp_path / 'junk', voc_root, '--resume', str(junk)), capsys, str(junk))
    assert '--load-weights' not in line  # an MXNet argument train_ssd.py does not have


def test_coco_creates_the_save_prefix_folder_as_voc_does(coco_root, tmp_path, monkeypatch,
                                                        capsys):
    monkeypatch.chdir(tmp_path)
    assert main(_yolo('new/', coco_root, dataset='coco')) == 0
    assert 'final validation' in capsys.readouterr().out
    assert os.path.isfile(tmp_path / 'new' / 'yolo3_mobilenet0.25_coco_train.log')


def test_nan_loss_is_one_error_line(voc_root, tmp_path, capsys):
    _fails(_yolo(str(tmp_path) + '/', voc_root, '--lr', '1e12'), capsys,
           'non-finite loss at epoch 0', 'lower --lr')


def test_ssd_nan_at_the_budget_gives_the_nan_reason_and_no_validation(voc_root, tmp_path,
                                                                     capsys):
    # the NaN step is also the last of the budget: its reason must survive, and a NaN model
    # is not validated
    line = _fails(_ssd(tmp_path, voc_root, '--lr', '1e12', '--log_interval', '1'), capsys,
                  'non-finite loss at epoch 0 batch 1 (iteration 2)', 'lower --lr')
    assert 'max_iter' not in line
    log = (tmp_path / 'ssd300_VOC_train.log').read_text()
    assert 'Validation' not in log
    assert 'Training stopped: non-finite loss' in log


def test_ctrl_c_after_a_resume_names_the_resumed_checkpoint(voc_root, tmp_path, capsys,
                                                            monkeypatch):
    from gluontrain.torch.ssd.step import SSDStep
    assert main(_ssd(tmp_path / 'first', voc_root)) == 0
    ckpt = str(tmp_path / 'first' / 'ssd300_VOC_last.ckpt')
    capsys.readouterr()

    def interrupt(self, batch, state=None):
        raise KeyboardInterrupt
    monkeypatch.setattr(SSDStep, '__call__', interrupt)
    assert main(_ssd(tmp_path / 'again', voc_root, '--max_iter', '4', '--resume', ckpt)) == \
        EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        'interrupted at epoch 0, batch 2; last checkpoint: {}; resume with --resume {}'
        .format(ckpt, ckpt))


def test_read_only_save_prefix_names_the_file(voc_root, tmpfs, capsys):
    folder = tmpfs('ro', 'ro,size=64k')
    _fails(_yolo(str(folder) + '/', voc_root), capsys,
           'cannot write {}/yolo3_mobilenet0.25_voc_'.format(folder), 'Read-only file system',
           '--save-prefix')


@pytest.mark.parametrize('size', [
    '64k',  # room for the logs, not for the weights
    '4k',  # the metrics file fails too, as the loop unwinds
])
def test_full_disk_names_the_file_being_written(voc_root, tmpfs, capsys, size):
    folder = tmpfs('full', 'size=' + size)
    line = _fails(_yolo(str(folder) + '/', voc_root), capsys,
                  'cannot write {}/yolo3_mobilenet0.25_voc_'.format(folder),
                  'No space left on device', 'free space on that disk', '--save-prefix')
    assert '.params' in line or '.ckpt' in line
    assert not [n for n in os.listdir(folder) if n.endswith('.tmp')]


def test_oserror_messages_say_the_fix():
    assert oserror_message(OSError(errno.ENOSPC, 'No space left on device', '/o/a.params'),
                           '--save_folder') == (
        'cannot write /o/a.params: No space left on device; free space on that disk or write '
        'the outputs elsewhere with --save_folder')
    assert 'read-only' in oserror_message(OSError(errno.EROFS, 'Read-only file system', '/o'))
    assert oserror_message(OSError(errno.EACCES, 'Permission denied', '/o'), '--save-prefix') == (
        '/o: Permission denied; check its permissions, or write the outputs elsewhere with '
        '--save-prefix')
    assert oserror_message(OSError(errno.EIO, 'Input/output error', '/o')) is None  # a bug?
    # a nameless failure raised while unwinding from a named one reports the named file
    try:
        try:
            raise OSError(errno.ENOSPC, 'No space left on device', '/o/first.params')
        finally:
            raise OSError(errno.ENOSPC, 'No space left on device')  # a hook's f.write
    except OSError as e:
        assert oserror_message(e).startswith('cannot write /o/first.params: No space')


def test_interrupt_message_names_the_position_and_the_checkpoint():
    state = TrainState(epoch=2, batch=5)
    assert interrupt_message(state) == 'interrupted at epoch 2, batch 5; no checkpoint written yet'
    state.last_checkpoint = 'out/run_last.ckpt'
    assert interrupt_message(state) == ('interrupted at epoch 2, batch 5; last checkpoint: '
                                        'out/run_last.ckpt; resume with --resume '
                                        'out/run_last.ckpt')
    assert interrupt_message(None) == 'interrupted before training started'


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_ctrl_c_is_one_line_with_exit_status_130(voc_root, tmp_path):
    err_path = tmp_path / 'stderr.txt'
    argv = _yolo(str(tmp_path) + '/', voc_root, '--epochs', '20')[2:]
    with open(err_path, 'w') as err:
        proc = subprocess.Popen([sys.executable, os.path.join(ROOT, 'scripts', 'train_yolov3.py')]
                                + argv, stdout=subprocess.PIPE, stderr=err, text=True, env=ENV,
                                preexec_fn=default_sigint)
        try:
            for line in proc.stdout:
                if line.startswith('[Epoch 1][Batch 1]'):  # epoch 0's checkpoint is written
                    break
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=120)
        finally:
            proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED
    err = err_path.read_text()
    assert 'Traceback' not in err, err
    ckpt = str(tmp_path / 'yolo3_mobilenet0.25_voc_last.ckpt')
    last = err.strip().splitlines()[-1]
    assert last.startswith('interrupted at epoch 1, batch ')
    assert last.endswith('; last checkpoint: {}; resume with --resume {}'.format(ckpt, ckpt))


@pytest.mark.slow  # a subprocess, several processes or a live GluonCV run: over ~5 s
def test_script_runs_a_tiny_training_and_prints_the_final_map(voc_root, tmp_path):
    res = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'scripts', 'train_yolov3.py'), '--network',
         'mobilenet0.25', '--dataset', 'voc', '--dataset-root', voc_root, '--gpus', '',
         '--no-pretrained-base', '--batch-size', '8', '-j', '0', '--data-shape', '128',
         '--no-random-shape', '--epochs', '1', '--save-prefix', str(tmp_path) + '/'],
        capture_output=True, text=True, env=ENV, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert 'final validation mAP: ' in res.stdout
    assert '[Epoch 0] Validation: ' in res.stdout


_PAUSE_AT_STAGING = '''
import sys, time
from gluontrain.core import checkpoint as ck
real = ck._new_staging_file


def pausing(path):
    tmp = real(path)
    if path.endswith('_last.ckpt'):  # the params files of the epoch are written already
        with open(tmp, 'wb') as f:
            f.write(b'half a checkpoint')
        print('staged ' + tmp, flush=True)
        time.sleep(600)
    return tmp


ck._new_staging_file = pausing
from gluontrain.__main__ import main
sys.exit(main(sys.argv[1:]))
'''


def _current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.slow  # two script runs as subprocesses (17 s on 2 busy cores)
def test_kill_at_staging_leaves_no_tmp_after_the_next_run(voc_root, tmp_path):
    out, system_tmp = tmp_path / 'out', tmp_path / 'systmp'
    out.mkdir()
    system_tmp.mkdir()
    env = dict(ENV, TMPDIR=str(system_tmp))
    argv = _yolo(str(out) + '/', voc_root)
    proc = subprocess.Popen([sys.executable, '-c', _PAUSE_AT_STAGING] + argv,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        staged = next((line.split(' ', 1)[1].strip() for line in proc.stdout
                       if line.startswith('staged ')), None)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert staged and os.path.isfile(staged)  # what kill -9 at the staging moment leaves
    assert os.path.basename(staged).startswith('.yolo3_mobilenet0.25_voc_last.ckpt.')
    res = subprocess.run([sys.executable, '-m', 'gluontrain'] + argv, capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    leftovers = [os.path.join(d, n) for d, _, names in os.walk(out) for n in names
                 if n.endswith('.tmp')]
    assert leftovers == [] and os.listdir(system_tmp) == []
    # written with the process umask, readable by colleagues as every other file
    ckpt = out / 'yolo3_mobilenet0.25_voc_last.ckpt'
    assert os.stat(ckpt).st_mode & 0o777 == 0o666 & ~_current_umask()


def test_oserror_messages_for_a_file_where_a_folder_should_be():
    """Issue 21: --log_dir / OUTPUT_DIR / --tensorboard naming an existing file used to end in a
    FileExistsError / NotADirectoryError traceback."""
    assert oserror_message(OSError(errno.EEXIST, 'File exists', '/o/tb'), '--log_dir') == (
        'cannot create the folder /o/tb: a file of that name exists; remove it, or write the '
        'outputs elsewhere with --log_dir')
    assert oserror_message(OSError(errno.ENOTDIR, 'Not a directory', '/o/f/sub')) == (
        '/o/f/sub: a part of this path is a file, not a folder; check the path, or write the '
        'outputs elsewhere')
    assert oserror_message(OSError(errno.EISDIR, 'Is a directory', '/o/w.pth')).startswith(
        '/o/w.pth: it is a folder, not a file; ')


def test_an_image_pil_cannot_identify_is_one_line():
    from PIL import UnidentifiedImageError
    assert oserror_message(UnidentifiedImageError("cannot identify image file '/d/1.jpg'")) == (
        "cannot identify image file '/d/1.jpg': the file is empty or not an image; replace it, "
        "or remove it from the annotations")


class _Recipe:
    """A stand-in recipe module for the funnel's tests."""
    OUTPUT_ARGUMENT = '--out'

    def __init__(self, error, advice=None):
        self.error = error
        if advice:
            self.RESUME_ADVICE = advice

    def main(self, argv):
        raise self.error


@pytest.mark.parametrize('error, line', [
    (FileExistsError(errno.EEXIST, 'File exists', '/o/taken'),
     'error: cannot create the folder /o/taken: a file of that name exists; remove it, or write '
     'the outputs elsewhere with --out'),
    (MemoryError(), 'error: out of memory: lower the image sizes or the batch size given'),
])
def test_the_funnel_turns_generic_failures_into_one_line(monkeypatch, capsys, error, line):
    monkeypatch.setattr('gluontrain.__main__.get_recipe', lambda name: _Recipe(error))
    assert main(['train', 'ssd']) == 1
    assert capsys.readouterr().err.strip() == line


def test_ctrl_c_uses_the_recipes_resume_advice(monkeypatch, capsys):
    """Issue 21: Ctrl-C on the scene-graph tools advised --resume, an option they lack."""
    error = KeyboardInterrupt()
    error.train_state = TrainState(epoch=0, batch=4)
    error.train_state.last_checkpoint = 'out/model_0000004.pth'
    monkeypatch.setattr('gluontrain.__main__.get_recipe', lambda name: _Recipe(
        error, 'rerun the same command (it reads last_checkpoint beside {path})'))
    assert main(['train', 'sgg']) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == (
        'interrupted at epoch 0, batch 4; last checkpoint: out/model_0000004.pth; rerun the '
        'same command (it reads last_checkpoint beside out/model_0000004.pth)')


def test_ctrl_c_that_a_library_turned_into_another_error_is_still_an_interrupt(monkeypatch,
                                                                              capsys):
    """Issue 21: MXNet's NDArray assignment catches everything, so a Ctrl-C landing inside it
    surfaced as a TypeError traceback instead of the one interrupted line."""
    try:
        try:
            raise KeyboardInterrupt
        except BaseException:  # what mxnet/ndarray/ndarray.py:_prepare_value_nd does
            raise TypeError('NDArray does not support assignment with non-array-like object')
    except TypeError as e:
        error = e
    error.train_state = TrainState(epoch=0, batch=3)
    monkeypatch.setattr('gluontrain.__main__.get_recipe', lambda name: _Recipe(error))
    assert main(['train', 'yolo3']) == EXIT_INTERRUPTED
    assert capsys.readouterr().err.strip() == (
        'interrupted at epoch 0, batch 3; no checkpoint written yet')
    # a TypeError of its own stays a bug, with its traceback
    monkeypatch.setattr('gluontrain.__main__.get_recipe',
                        lambda name: _Recipe(TypeError('a bug')))
    with pytest.raises(TypeError, match='a bug'):
        main(['train', 'yolo3'])


def test_sys_exit_with_a_message_is_one_error_line(monkeypatch, capsys):
    """``raise SystemExit('--dataset ...')`` printed its text with no ``error:`` prefix."""
    monkeypatch.setattr('gluontrain.__main__.get_recipe', lambda name: _Recipe(
        SystemExit("--dataset 'x' is not supported")))
    assert main(['train', 'yolo3']) == 1
    assert capsys.readouterr().err == "error: --dataset 'x' is not supported\n"
    monkeypatch.setattr('gluontrain.__main__.get_recipe', lambda name: _Recipe(SystemExit(2)))
    with pytest.raises(SystemExit):  # argparse's exit keeps its status
        main(['train', 'yolo3'])


def test_a_collective_timeout_is_one_line_naming_the_stopped_rank(monkeypatch, capsys):
    """A gloo collective that timed out because another rank stopped (torch raises a
    RuntimeError) ends in one line from the watchdog; any other RuntimeError is a bug and
    keeps its traceback."""
    from gluontrain.torch import dist_watchdog
    timeout = dist_watchdog.CollectiveTimeoutError(
        'rank 1 stopped answering (no heartbeat for 5 s; seen from rank 0); the job ends')
    monkeypatch.setattr('gluontrain.__main__.get_recipe', lambda name: _Recipe(
        RuntimeError('[gloo] Timed out waiting 5000ms for recv operation')))
    monkeypatch.setattr(dist_watchdog, 'explain_collective_error',
                        lambda e: str(timeout) if 'Timed out' in str(e) else None)
    assert main(['train', 'ssd']) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ['error: ' + str(timeout)]
    monkeypatch.setattr('gluontrain.__main__.get_recipe', lambda name: _Recipe(
        RuntimeError('a bug')))
    with pytest.raises(RuntimeError, match='a bug'):
        main(['train', 'ssd'])


@pytest.mark.parametrize('recipe, missing, library, hint', [
    ('yolo3', ('mxnet', 'gluoncv'), 'gluoncv', '--backend torch'),
    ('ssd', ('torch',), 'torch', "'.[torch]'")])
def test_a_recipe_whose_framework_is_missing_is_one_line_naming_the_install(recipe, missing,
                                                                               library, hint):
    # None in sys.modules makes the import fail as it does where the package is not installed
    code = ('import sys; sys.modules.update(dict.fromkeys({!r})); '
            'from gluontrain.__main__ import main; '
            'sys.exit(main(["train", {!r}, "--help"]))'.format(missing, recipe))
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert done.stderr.count('\n') == 1 and 'Traceback' not in done.stderr
    assert done.stderr.startswith("error: recipe {!r} needs {}, which is not installed".format(
        recipe, library)) and hint in done.stderr


def test_ctrl_c_while_the_backend_imports_is_one_line(monkeypatch, capsys):
    # importing MXNet or torch takes seconds: a Ctrl-C then must not be a traceback
    import gluontrain.__main__ as cli

    def ctrl_c(_name):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, 'get_recipe', ctrl_c)
    assert cli.main(['train', 'yolo3', '--gpus', '']) == EXIT_INTERRUPTED
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ['interrupted before training started']
