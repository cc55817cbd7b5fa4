"""The recipe on the common engine: seamseg's files, gluontrain's files, exact resume, the
command line's errors.

Two runs are shared by several tests (module fixtures, trim of issue 22): ``cli_run``, the
command line's seed-0 run of TINY's 2 epochs (its files, its stdout), and ``one_epoch_run``,
the same run stopped after its first epoch; a test that writes into a run's folder copies it
first. Before, the CLI, exact-resume, seamseg-resume, --eval and snapshot-score tests trained
11 epochs between them (six runs of their own, three of 2 epochs and three of 1, and two
1-epoch resumes); now 5 (the two shared runs and the two resumes). The data is written
in-process (the generator script has its own tests in tests/data/test_synthetic.py). The file:
55.0 -> 30.7 s CPU (2 loaded cores, -n 0).
"""
import contextlib
import io
import json
import os
import shutil

import pytest
import torch

import gluontrain
from gluontrain.__main__ import main as cli_main
from gluontrain.data import synthetic
from gluontrain.torch.frcnn import recipe
from gluontrain.torch.frcnn.snapshot import load_snapshot

# test_frcnn_distributed.py imports REPO and TINY from here
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
TINY = """[general]
log_interval = 2
[body]
body = resnet18
body_params = {"width_mult": 0.125}
normalization_mode = bn
num_frozen = 0
bn_frozen = no
out_channels = {"mod1": 8, "mod2": 8, "mod3": 16, "mod4": 32, "mod5": 64}
[fpn]
out_channels = 16
[rpn]
hidden_channels = 16
num_pre_nms_train = 500
num_post_nms_train = 100
num_pre_nms_val = 300
num_post_nms_val = 50
[roi]
num_samples = 32
[scheduler]
epochs = 2
burn_in_steps = 2
[dataloader]
shortest_size = 96
longest_max_size = 128
train_batch_size = 4
val_batch_size = 4
num_workers = 0
train_set = train2017
val_set = val2017
"""


@pytest.fixture(scope='module')
def data_root(tmp_path_factory):
    # what `make_synthetic_data.py coco --num-train 12 --num-val 4` writes, without a python
    # start
    root = tmp_path_factory.mktemp('frcnn_data')
    synthetic.generate('coco', str(root), num_train=12, num_val=4)
    return root


@pytest.fixture(scope='module')
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp('frcnn_config') / 'tiny.ini'
    path.write_text(TINY)
    return str(path)


def _first_epoch_only(real_loop):
    def one_epoch(step, data, hooks, start, epochs, state, **kw):
        return real_loop(step, data, hooks, start, 1, state, **kw)
    return one_epoch


@pytest.fixture(scope='module')
def cli_run(tmp_path_factory, config, data_root):
    """``gluontrain train frcnn --seed 0`` (TINY: 2 epochs of 3 batches): (exit status, its
    --log_dir, its stdout)."""
    log_dir = tmp_path_factory.mktemp('cli_run') / 'run'
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli_main(['train', 'frcnn', '--seed', '0', '--log_dir', str(log_dir), config,
                           str(data_root)])
    return status, log_dir, out.getvalue()


@pytest.fixture(scope='module')
def one_epoch_run(tmp_path_factory, config, data_root):
    """The same run as ``cli_run`` (recipe.main, seed 0) stopped after its first epoch, without
    pictures (what uses it compares weights and positions): (its TrainState, its --log_dir).
    Copy the folder before writing into it."""
    log_dir = tmp_path_factory.mktemp('one_epoch_run') / 'run'
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(recipe, 'fit', _first_epoch_only(recipe.fit))
        state = recipe.main(['--seed', '0', '--log_dir', str(log_dir), '--no-plots', config,
                             str(data_root)])
    return state, log_dir


def test_no_plots_draws_no_picture_and_keeps_the_other_files(one_epoch_run):
    names = set(os.listdir(one_epoch_run[1]))
    assert not [n for n in names if n.endswith('.png')]
    assert {'training.log', 'model_last.pth.tar', 'frcnn_last.ckpt',
            'frcnn_metrics.jsonl'} <= names


def test_registered_with_the_contract():
    assert gluontrain.get_recipe('frcnn') is gluontrain.torch.frcnn
    assert 'frcnn' in gluontrain.list_recipes()


def test_cli_run_writes_seamseg_and_gluontrain_files(cli_run):
    status, log_dir, out = cli_run
    assert status == 0
    names = set(os.listdir(log_dir))
    assert {'training.log', 'model_last.pth.tar', 'frcnn_last.ckpt', 'frcnn_metrics.jsonl',
            'frcnn_curves.png', 'frcnn_val_samples.png', 'frcnn_train.log'} <= names
    log = (log_dir / 'training.log').read_text()
    assert 'det_map=' in log and 'roi_cls_loss=' in log and 'lr=' in log
    snap = load_snapshot(str(log_dir / 'model_last.pth.tar'))
    assert snap['training_meta']['epoch'] == 1
    assert snap['training_meta']['global_step'] == 2 * 3  # 12 images / 4, two epochs
    assert set(snap['state_dict']) >= {'body', 'rpn_head', 'roi_head', 'optimizer',
                                       'loss_meter', 'roi_bbx_loss_meter'}
    lines = [json.loads(x) for x in (log_dir / 'frcnn_metrics.jsonl').read_text().splitlines()]
    assert len(lines) == 2 and all('obj_loss' in str(x) for x in lines)
    assert 'final validation det_map' in out


def _weights(path):
    return load_snapshot(path)['state_dict']


def test_resume_is_exact(tmp_path, config, data_root, cli_run, one_epoch_run):
    """The 2-epoch run equals its first epoch resumed from frcnn_last.ckpt. Both are the shared
    runs (seed 0; before the trim the test trained its own, seed 3: 19.5 s CPU run alone, now
    6.6 s in the file's run, the one-epoch run included)."""
    full, part = cli_run[1], tmp_path / 'part'
    shutil.copytree(str(one_epoch_run[1]), str(part))
    # a different seed: everything that matters must come from the checkpoint
    state = recipe.main(['--seed', '99', '--log_dir', str(part), '--no-plots', '--resume',
                         str(part / 'frcnn_last.ckpt'), config, str(data_root)])
    assert state.iteration == 6
    a, b = _weights(str(full / 'model_last.pth.tar')), _weights(str(part / 'model_last.pth.tar'))
    for module in ('body', 'rpn_head', 'roi_head', 'loss_meter'):
        for k, v in a[module].items():
            assert torch.equal(v, b[module][k]), (module, k)


def test_resume_from_seamseg_snapshot_continues_epoch_and_step(tmp_path, config, data_root,
                                                               one_epoch_run):
    run = tmp_path / 'run'
    shutil.copytree(str(one_epoch_run[1]), str(run))
    shutil.copy(str(run / 'model_last.pth.tar'), str(tmp_path / 'snap.pth.tar'))
    state = recipe.main(['--log_dir', str(run), '--no-plots', '--resume',
                         str(tmp_path / 'snap.pth.tar'), config, str(data_root)])
    assert state.epoch == 1 and state.iteration == 6


def _cli_error(argv, capsys):
    status = cli_main(['train', 'frcnn'] + argv)
    err = capsys.readouterr().err.strip().splitlines()
    return status, err


def test_cli_missing_data_root(tmp_path, config, capsys):
    status, err = _cli_error(['--log_dir', str(tmp_path), config, str(tmp_path / 'nope')],
                             capsys)
    assert status == 1 and len(err) == 1 and err[0].startswith('error: data root')
    assert 'make_synthetic_data.py' in err[0]


def test_cli_malformed_json(tmp_path, config, data_root, capsys):
    root = tmp_path / 'bad'
    shutil.copytree(str(data_root), str(root))
    (root / 'annotations' / 'instances_train2017.json').write_text('{"images": [')
    status, err = _cli_error(['--log_dir', str(tmp_path / 'r'), config, str(root)], capsys)
    assert status == 1 and len(err) == 1
    assert 'instances_train2017.json is not valid JSON' in err[0]


def test_cli_box_without_size(tmp_path, config, data_root, capsys):
    root = tmp_path / 'bad'
    shutil.copytree(str(data_root), str(root))
    path = root / 'annotations' / 'instances_train2017.json'
    js = json.loads(path.read_text())
    js['annotations'][0]['bbox'][2] = 0
    path.write_text(json.dumps(js))
    status, err = _cli_error(['--log_dir', str(tmp_path / 'r'), config, str(root)], capsys)
    assert status == 1 and len(err) == 1 and 'positive width and height' in err[0]


def test_cli_images_without_boxes_train_as_background(tmp_path, data_root):
    """One epoch (was TINY's 2): its 3 batches of 4 hold all 12 training images, the one
    without boxes included (5.2 -> 3.3 s CPU)."""
    config = tmp_path / 'one_epoch.ini'
    config.write_text(TINY.replace('epochs = 2', 'epochs = 1'))
    root = tmp_path / 'empty_imgs'
    shutil.copytree(str(data_root), str(root))
    path = root / 'annotations' / 'instances_train2017.json'
    js = json.loads(path.read_text())
    first = js['images'][0]['id']
    js['annotations'] = [a for a in js['annotations'] if a['image_id'] != first]
    path.write_text(json.dumps(js))
    assert cli_main(['train', 'frcnn', '--log_dir', str(tmp_path / 'r'), str(config),
                     str(root)]) == 0
    # all 3 batches (the 12 images) trained
    assert load_snapshot(str(tmp_path / 'r' / 'model_last.pth.tar'))['training_meta'][
        'global_step'] == 3


def test_cli_unknown_config_key(tmp_path, data_root, capsys):
    cfg = tmp_path / 'typo.ini'
    cfg.write_text(TINY.replace('[roi]\n', '[roi]\nnum_sample = 3\n'))
    status, err = _cli_error(['--log_dir', str(tmp_path / 'r'), str(cfg), str(data_root)],
                             capsys)
    assert status == 1 and len(err) == 1 and 'num_sample' in err[0]
    assert 'num_samples' in err[0]


def test_cli_trains_on_iss_data(tmp_path):
    root = tmp_path / 'iss'
    synthetic.generate('iss', str(root), num_train=8, num_val=4)
    cfg = tmp_path / 'iss.ini'
    cfg.write_text(TINY.replace('epochs = 2', 'epochs = 1').replace(
        'train_set = train2017', 'train_set = train').replace('val_set = val2017', 'val_set = val'))
    # the validation json defaults to {root}/coco/{val_set}.json when [dataloader] coco_gt
    # is empty
    state = recipe.main(['--log_dir', str(tmp_path / 'run'), str(cfg), str(root)])
    assert state.iteration == 2 and state.scores['val'][0] == ['det_map']
    assert 'det_map=' in (tmp_path / 'run' / 'training.log').read_text()


def test_seed_train_signature_drives_the_real_detector(tmp_path, config, data_root):
    """seamseg's way: ``train(model, optimizer, scheduler, dataloader, meters, **varargs)``."""
    from collections import OrderedDict
    from gluontrain.torch.frcnn.config import load_config
    from gluontrain.torch.frcnn.data import make_dataloaders
    from gluontrain.torch.frcnn.meters import AverageMeter
    from gluontrain.torch.frcnn.model import make_model
    from gluontrain.torch.frcnn.optim import make_optimizer
    from gluontrain.torch.frcnn.seamseg_loops import train as seamseg_train
    torch.manual_seed(0)
    conf = load_config(config)
    train_loader, _ = make_dataloaders(conf, str(data_root))
    model = make_model(conf, train_loader.dataset.num_thing)
    optimizer, scheduler, batch_update, epochs = make_optimizer(conf, model, len(train_loader))
    meters = OrderedDict((k, AverageMeter((), 1 - 1 / len(train_loader)))
                         for k in ('loss', 'obj_loss', 'bbx_loss', 'roi_cls_loss',
                                   'roi_bbx_loss'))
    before = model.roi_head.roi_cls.weight.detach().clone()
    step = seamseg_train(model, optimizer, scheduler, train_loader, meters, epoch=0,
                         num_epochs=epochs, global_step=0, batch_update=batch_update,
                         loss_weights=(1., 1., 1., 1.), log_interval=1)
    assert step == len(train_loader) == 3
    assert meters['loss'].count.item() > 0 and torch.isfinite(meters['loss'].mean)
    assert not torch.equal(before, model.roi_head.roi_cls.weight)


def test_eval_validates_a_snapshot_once(tmp_path, config, data_root, one_epoch_run):
    first, run = one_epoch_run
    state = recipe.main(['--eval', '--resume', str(run / 'model_last.pth.tar'), '--log_dir',
                         str(tmp_path / 'eval'), config, str(data_root)])
    # the same weights and the same (epoch-0) validation batches: the same AP
    assert state.scores['val'] == first.scores['val']
    assert 'det_map=' in (tmp_path / 'eval' / 'eval.log').read_text()
    assert state.iteration == 0


def test_snapshot_scores_follow_seamseg(cli_run):
    _, run, out = cli_run
    meta = load_snapshot(str(run / 'model_last.pth.tar'))['training_meta']
    # the run's last validation, as the command line prints it (repr: the float round-trips)
    final = float(out.split('final validation det_map: ')[1].split()[0])
    assert meta['last_score'] == final
    assert meta['best_score'] == max(meta['last_score'], meta['best_score'])


def _tiny_model(config, data_root, extra_classes=0):
    from gluontrain.torch.frcnn.config import load_config
    from gluontrain.torch.frcnn.data import make_dataset
    from gluontrain.torch.frcnn.model import make_model
    conf = load_config(config)
    ds = make_dataset(str(data_root), conf['dataloader']['train_set'], None)
    return conf, make_model(conf, ds.num_thing + extra_classes, ds.num_stuff)


def test_cli_resume_renamed_snapshot_is_one_error_line(tmp_path, config, data_root, capsys):
    """Every key renamed: 0 tensors load, and the command line (scripts/train_detection.py is
    ``gluontrain train frcnn``; run here in this process, 5.5 -> 0.2 s CPU) says so in one line
    on stderr (seamseg's lenient load would train from scratch, silently)."""
    from gluontrain.torch.frcnn.snapshot import MODULES, SNAPSHOT_FIX, save_snapshot
    conf, model = _tiny_model(config, data_root)
    states = {m: {'net.' + k: v for k, v in getattr(model, m).state_dict().items()}
              for m in MODULES}
    snap = tmp_path / 'renamed.pth.tar'
    save_snapshot(str(snap), conf, 0, 0, 0, 0, **states)
    expected = sum(1 for k in model.body.state_dict() if not k.endswith('num_batches_tracked'))
    capsys.readouterr()
    status = cli_main(['train', 'frcnn', '--log_dir', str(tmp_path / 'run'), '--resume',
                       str(snap), config, str(data_root)])
    err = capsys.readouterr().err
    assert status == 1, err
    assert err.strip().splitlines() == [
        'error: --resume {} [body]: loaded 0 of {} tensors; none of its keys '
        '(net.backbone.mod1.bn1.{{bias, num_batches_tracked, running_mean, running_var, '
        'weight}}, net.backbone.mod1.conv1.weight, ...) is a key of the model '
        '(backbone.mod1.bn1.{{bias, running_mean, running_var, weight}}, '
        'backbone.mod1.conv1.weight, ...); {}'.format(snap, expected, SNAPSHOT_FIX)]


def test_eval_pre_train_reports_a_partial_load(tmp_path, config, data_root):
    """seamseg's --pre_train from a detector of more classes: the classifier and box
    regressor are skipped (as seamseg) and the log says so."""
    from gluontrain.torch.frcnn.snapshot import MODULES, save_snapshot
    conf, model = _tiny_model(config, data_root, extra_classes=2)
    snap = tmp_path / 'more_classes.pth.tar'
    save_snapshot(str(snap), conf, 0, 0, 0, 0,
                  **{m: getattr(model, m).state_dict() for m in MODULES})
    assert cli_main(['train', 'frcnn', '--eval', '--pre_train', str(snap), '--log_dir',
                     str(tmp_path / 'eval'), config, str(data_root)]) == 0
    log = (tmp_path / 'eval' / 'eval.log').read_text()
    body = len(model.body.state_dict())
    assert 'loaded {0} of {0} tensors from {1} [body] (0 missing, 0 unexpected, 0 wrong ' \
           'shape)'.format(body, snap) in log
    assert 'loaded 10 of 10 tensors from {} [rpn_head] (0'.format(snap) in log
    # fc1, bn1 (5), fc2, bn2 (5) load; roi_cls and roi_bbx weight and bias do not
    assert 'loaded 12 of 16 tensors from {} [roi_head] (0 missing, 0 unexpected, 4 wrong ' \
           'shape)'.format(snap) in log
    assert "Skip loading parameter 'roi_cls.weight' to the model due to incompatible shapes" \
        in log


# ----- issue 21: configuration and output problems are one error line before anything is
# written or built

def test_bad_config_value_is_one_error_line_before_anything_is_written(tmp_path, capsys):
    bad = tmp_path / 'bad.ini'
    bad.write_text(TINY.replace('log_interval = 2', 'log_interval = 0'))
    log_dir = tmp_path / 'run'
    assert cli_main(['train', 'frcnn', '--log_dir', str(log_dir), str(bad),
                     str(tmp_path / 'data')]) == 1
    err = capsys.readouterr().err
    assert err == ('error: {}: [general] log_interval = 0 is out of range; allowed: an integer '
                   '>= 1 (iterations between log lines; seamseg divides by it)\n'.format(bad))
    assert not log_dir.exists()


def test_log_dir_that_is_a_file_is_one_error_line(tmp_path, config, capsys):
    taken = tmp_path / 'taken'
    taken.write_text('x')
    assert cli_main(['train', 'frcnn', '--log_dir', str(taken), config,
                     str(tmp_path / 'data')]) == 1
    assert capsys.readouterr().err == (
        'error: --log_dir {0}: {0} is an existing file, not a folder; give a folder (it is '
        'created if missing)\n'.format(taken))
    assert taken.read_text() == 'x'


def test_missing_batch_size_names_the_config_file(tmp_path, capsys):
    bad = tmp_path / 'nobatch.ini'
    bad.write_text(TINY.replace('train_batch_size = 4\n', ''))
    assert cli_main(['train', 'frcnn', '--log_dir', str(tmp_path / 'run'), str(bad),
                     str(tmp_path / 'data')]) == 1
    assert capsys.readouterr().err.startswith(
        'error: {}: [dataloader] train_batch_size is not set; seamseg gives it no default'
        .format(bad))


def test_resume_of_another_body_is_one_line_for_both_checkpoint_kinds(tmp_path, config):
    # a ResNet-18 run resumed under a ResNet-34 config: torch's "Missing key(s)" dump before
    from gluontrain.torch.checkpoint import restore_checkpoint, save_checkpoint
    from gluontrain.torch.frcnn.config import load_config
    from gluontrain.torch.frcnn.hooks import SeamsegCheckpointHook, SeamsegLogHook
    from gluontrain.torch.frcnn.model import make_model
    from gluontrain.torch.frcnn.optim import make_optimizer
    from gluontrain.torch.frcnn.snapshot import save_snapshot
    r34 = tmp_path / 'r34.ini'
    r34.write_text(TINY.replace('body = resnet18', 'body = resnet34'))
    models = {}
    for name, path in (('r18', config), ('r34', str(r34))):
        conf = load_config(path)
        model = make_model(conf, 3, 0)
        models[name] = (conf, model, make_optimizer(conf, model, 4)[0])
    conf, m18, o18 = models['r18']
    ckpt = str(tmp_path / 'frcnn_last.ckpt')
    save_checkpoint(ckpt, m18, o18, None, 0, 3, 0.0, {}, extra={'hooks': {}})
    _, m34, o34 = models['r34']
    with pytest.raises(ValueError) as err:
        restore_checkpoint(ckpt, m34, o34)
    assert str(err.value).startswith('--resume {}: loaded '.format(ckpt))
    assert '96 missing' in str(err.value) and '\n' not in str(err.value)
    snap = str(tmp_path / 'model_last.pth.tar')
    log_hook = SeamsegLogHook(o34, (1., 1., 1., 1.), 4, 2, 2, None)
    save_snapshot(snap, conf, 0, 0., 0., 3, body=m18.body.state_dict(),
                  rpn_head=m18.rpn_head.state_dict(), roi_head=m18.roi_head.state_dict(),
                  optimizer=o18.state_dict(),
                  **{k + '_meter': m.state_dict() for k, m in log_hook.meters.items()})
    with pytest.raises(ValueError) as err:
        SeamsegCheckpointHook(str(tmp_path), m34, o34, '', log_hook).resume(snap)
    assert str(err.value).startswith('--resume {} [body]: loaded '.format(snap))
    assert '\n' not in str(err.value)


def test_resume_of_a_folder_says_folder_not_missing(tmp_path, config, capsys):
    folder = tmp_path / 'run'
    folder.mkdir()
    assert cli_main(['train', 'frcnn', '--log_dir', str(tmp_path / 'out'), '--resume',
                     str(folder), config, str(tmp_path / 'data')]) == 1
    assert capsys.readouterr().err == (
        'error: --resume {} is a folder, not a file; pass the frcnn_last.ckpt or '
        'model_last.pth.tar a run wrote in its --log_dir\n'.format(folder))
