"""The 'sgg' recipe end to end on tiny generated VG data: exact resume after a crash, the
MAX_DECAY_STEP stop that still writes model_final.pth, the CLI's one-line errors, and a
2-process torchrun/gloo run.

The CLI cases run ``gluontrain.__main__.main(['train', 'sgg' | 'sgg-detector', ...])`` in this
process, which is all that scripts/train_relation.py and scripts/pretrain_detector.py do
(tests/hostile/test_hostile_sgg.py runs the scripts themselves). Trim of issue 22: they were 12
python starts of 3.3-6.3 s CPU each, now 0.0-0.2 s each; the file (-m "not slow") 90.6 -> 30.0
s CPU on 2 loaded cores.
"""
import dataclasses
import os
from types import SimpleNamespace

import pytest
import torch

import gluontrain
from launch import dist_env, torchrun  # tests/launch.py
from gluontrain.__main__ import main as cli_main
from gluontrain.data.vg import write_vg
from gluontrain.torch.frcnn.snapshot import save_snapshot
from gluontrain.torch.sgg import recipe
from gluontrain.torch.sgg import step as sgg_step, trainer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
CONFIGS = os.path.join(REPO, 'gluontrain', 'torch', 'sgg', 'configs')
PREDCLS = os.path.join(CONFIGS, 'predcls_motifs_cpu.yaml')
TINY = ['SOLVER.IMS_PER_BATCH', '2', 'TEST.IMS_PER_BATCH', '2', 'DATASETS.NUM_VAL_IM', '4',
        'INPUT.MIN_SIZE_TRAIN', '(96,)', 'INPUT.MAX_SIZE_TRAIN', '160',
        'INPUT.MIN_SIZE_TEST', '96', 'INPUT.MAX_SIZE_TEST', '160']


@pytest.fixture(scope='module')
def vg_root(tmp_path_factory):
    root = tmp_path_factory.mktemp('vg')
    write_vg(str(root), num_train=16, num_val=4, seed=1, image_size=(96, 128))
    return str(root)


def _argv(vg_root, out, *opts):
    # --no-plots: none of these runs' pictures is looked at (tests/torch/sgg/test_sgg_plots.py
    # and the CLI cases draw them)
    return ['--config-file', PREDCLS, '--data-dir', vg_root, '--skip-test', '--no-plots',
            'OUTPUT_DIR', str(out)] + TINY + list(opts)


def _weights(path):
    return torch.load(path, weights_only=True)['model']


def test_recipes_registered():
    assert gluontrain.get_recipe('sgg') is recipe
    assert gluontrain.get_recipe('sgg-detector').__name__.endswith('detector_recipe')


def _without_pictures(monkeypatch):
    """The recipe's hooks without the curves and scene-graph pictures (matplotlib: about half
    of a tiny run's time). They read the model and the meters only; what a resume restores is
    the same with or without them, and test_sgg_plots.py draws them."""
    real = trainer.build_hooks
    monkeypatch.setattr(trainer, 'build_hooks', lambda spec, *args, **kw: real(
        dataclasses.replace(spec, plots=False), *args, **kw))


def test_exact_resume_after_crash(vg_root, tmp_path, monkeypatch):
    """Without the pictures (trim of issue 22): 19.1 -> 11.6 s CPU on 2 loaded cores."""
    _without_pictures(monkeypatch)
    opts = ('SOLVER.MAX_ITER', '6', 'SOLVER.CHECKPOINT_PERIOD', '3', 'SOLVER.VAL_PERIOD', '3',
            'SOLVER.STEPS', '(4,)', 'SOLVER.WARMUP_ITERS', '2',
            'SOLVER.PRE_VAL', 'True')  # SGB validates before training, also on a resume
    full = recipe.main(_argv(vg_root, tmp_path / 'full', *opts))
    assert full.iteration == 6
    reference = _weights(str(tmp_path / 'full' / 'model_final.pth'))

    original = sgg_step.SGGStep.__call__

    def crashing(self, batch, state):
        if state.iteration == 4:
            raise RuntimeError('simulated crash')
        return original(self, batch, state)
    monkeypatch.setattr(sgg_step.SGGStep, '__call__', crashing)
    with pytest.raises(RuntimeError, match='simulated crash'):
        recipe.main(_argv(vg_root, tmp_path / 'crash', *opts))
    assert (tmp_path / 'crash' / 'last_checkpoint').read_text() == 'model_0000003.pth'
    monkeypatch.setattr(sgg_step.SGGStep, '__call__', original)
    resumed = recipe.main(_argv(vg_root, tmp_path / 'crash', *opts))  # same command resumes
    assert resumed.resumed_from.endswith('model_0000003.pth') and resumed.iteration == 6
    got = _weights(str(tmp_path / 'crash' / 'model_final.pth'))
    assert set(got) == set(reference)
    for k, v in reference.items():
        assert torch.equal(v, got[k]), k
    # the metrics file has one row per pass as the uninterrupted run's
    rows = (tmp_path / 'crash' / 'sgg_metrics.jsonl').read_text().splitlines()
    assert len(rows) == len((tmp_path / 'full' / 'sgg_metrics.jsonl').read_text().splitlines())


def test_max_decay_step_stops_and_writes_final(vg_root, tmp_path):
    # every validation is "bad" (threshold 10): one decay at the first one ends the run
    state = recipe.main(_argv(
        vg_root, tmp_path, 'SOLVER.MAX_ITER', '50', 'SOLVER.VAL_PERIOD', '2',
        'SOLVER.CHECKPOINT_PERIOD', '100', 'SOLVER.SCHEDULE.TYPE', 'WarmupReduceLROnPlateau',
        'SOLVER.SCHEDULE.PATIENCE', '1', 'SOLVER.SCHEDULE.COOLDOWN', '0',
        'SOLVER.SCHEDULE.THRESHOLD', '10.0', 'SOLVER.SCHEDULE.MAX_DECAY_STEP', '1'))
    assert state.iteration == 2 and 'MAX_DECAY_STEP' in state.stop_reason
    final = torch.load(str(tmp_path / 'model_final.pth'), weights_only=True)
    assert final['iteration'] == 2 and final['scheduler']['stage_count'] == 1
    # --no-plots: the other files, no picture
    assert not [f for f in os.listdir(tmp_path) if f.endswith('.png')]
    assert os.path.isfile(tmp_path / 'sgg_metrics.jsonl')


@pytest.mark.parametrize('predictor, extra', [
    ('IMPPredictor', ()), ('TransformerPredictor', (
        'MODEL.ROI_RELATION_HEAD.TRANSFORMER.OBJ_LAYER', '1',
        'MODEL.ROI_RELATION_HEAD.TRANSFORMER.REL_LAYER', '1',
        'MODEL.ROI_RELATION_HEAD.TRANSFORMER.INNER_DIM', '64')),
    ('VCTreePredictor', ()),
    ('CausalAnalysisPredictor', ('MODEL.ROI_RELATION_HEAD.CAUSAL.EFFECT_TYPE', 'TDE'))])
def test_every_registered_predictor_trains_and_evaluates(vg_root, tmp_path, predictor, extra):
    state = recipe.main(_argv(vg_root, tmp_path, 'MODEL.ROI_RELATION_HEAD.PREDICTOR', predictor,
                              'SOLVER.MAX_ITER', '2', 'SOLVER.VAL_PERIOD', '2',
                              'SOLVER.CHECKPOINT_PERIOD', '2', *extra))
    names, values = state.scores['val']
    assert state.iteration == 2 and names[-1] == 'val_score' and 0.0 <= values[-1] <= 1.0
    if predictor == 'IMPPredictor':  # SGB's slow heads: the relation extractors at lr / 10
        final = torch.load(str(tmp_path / 'model_final.pth'), weights_only=True)
        lrs = {g['initial_lr'] for g in final['optimizer']['param_groups']}
        assert len(lrs) == 2 and max(lrs) == pytest.approx(10 * min(lrs))


SCRIPT_RECIPES = {'train_relation.py': 'sgg', 'pretrain_detector.py': 'sgg-detector'}


@pytest.fixture
def cli(capsys, monkeypatch):
    """``cli(*args, script=...)``: what ``python scripts/<script> args`` does, in this process
    (run in REPO, as the scripts were): ``(returncode, stdout, stderr)`` as attributes."""
    def run(*args, script='train_relation.py'):
        monkeypatch.chdir(REPO)
        capsys.readouterr()
        code = cli_main(['train', SCRIPT_RECIPES[script]] + [str(a) for a in args])
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)
    return run


@pytest.mark.parametrize('args, message', [
    (['--config-file', 'nope.yaml'], 'config file nope.yaml does not exist'),
    (['--config-file', PREDCLS, 'SOLVER.MAX_ITERS', '3'], 'Non-existent key: SOLVER.MAX_ITERS'),
    (['--config-file', PREDCLS, 'SOLVER.MAX_ITER'], 'KEY VALUE pairs'),
    (['--config-file', os.path.join(CONFIGS, 'detector_cpu.yaml')],
     'MODEL.RELATION_ON is False but this is the relation training'),
    pytest.param(['--config-file', PREDCLS, 'MODEL.DEVICE', 'cuda'],
                 "MODEL.DEVICE is 'cuda' but CUDA is not available",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason='CUDA present')),
])
def test_cli_errors_are_one_line(cli, tmp_path, args, message):
    res = cli(*args, 'OUTPUT_DIR', str(tmp_path / 'o'))
    assert res.returncode == 1, res.stderr[-2000:]
    assert message in res.stderr and 'Traceback' not in res.stderr


def test_cli_missing_data_names_the_file(cli, tmp_path):
    res = cli('--config-file', PREDCLS, '--data-dir', str(tmp_path / 'none'), 'OUTPUT_DIR',
               str(tmp_path / 'o'))
    assert res.returncode == 1 and 'Traceback' not in res.stderr
    assert str(tmp_path / 'none') in res.stderr


def test_cli_misaligned_image_data_names_the_file(cli, vg_root, tmp_path):
    import json
    import shutil
    bad = tmp_path / 'vg'
    shutil.copytree(vg_root, str(bad))
    path = bad / 'image_data.json'
    rows = json.loads(path.read_text())
    path.write_text(json.dumps(rows[1:]))  # one image row missing: every later row shifts
    res = cli('--config-file', PREDCLS, '--data-dir', str(bad), 'OUTPUT_DIR',
               str(tmp_path / 'o'))
    assert res.returncode == 1 and 'Traceback' not in res.stderr
    assert 'image_data.json' in res.stderr.splitlines()[-1]


def _two_stage_snapshot(path):
    save_snapshot(str(path), '[general]\n', 3, 0.1, 0.2, 100,
                  body={'mod1.conv1.weight': torch.zeros(4, 3, 3, 3)},
                  rpn_head={'conv_fc.weight': torch.zeros(4, 4, 3, 3)},
                  roi_head={'fc.fc6.weight': torch.zeros(8, 4)})
    return str(path)


def _one_error_line(res):
    assert res.returncode == 1, res.stderr[-3000:]
    assert 'Traceback' not in res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith('error:')]
    assert len(errors) == 1, res.stderr[-3000:]
    return errors[0]


@pytest.mark.parametrize('given_as', ['MODEL.PRETRAINED_DETECTOR_CKPT', 'MODEL.WEIGHT',
                                      'last_checkpoint'])
def test_cli_refuses_a_two_stage_snapshot(cli, vg_root, tmp_path, given_as):
    """Issue 20/21: a seamseg / frcnn model_last.pth.tar used to "load", train from random
    weights and exit 0."""
    out = tmp_path / 'o'
    out.mkdir()
    snap = _two_stage_snapshot(out / 'model_last.pth.tar')
    opts = ['SOLVER.MAX_ITER', '2']
    script = 'train_relation.py'
    config = PREDCLS
    if given_as == 'last_checkpoint':
        (out / 'last_checkpoint').write_text('model_last.pth.tar')
    elif given_as == 'MODEL.WEIGHT':
        script, config = 'pretrain_detector.py', os.path.join(CONFIGS, 'detector_cpu.yaml')
        opts += [given_as, snap]
    else:
        opts += [given_as, snap]
    res = cli('--config-file', config, '--data-dir', vg_root, '--skip-test', 'OUTPUT_DIR',
               str(out), *(TINY + opts), script=script)
    line = _one_error_line(res)
    assert snap in line and 'a seamseg / two-stage (frcnn) snapshot' in line
    assert ('last_checkpoint names this file' if given_as == 'last_checkpoint' else
            'pass as ' + given_as) in line
    assert not [n for n in os.listdir(str(out)) if n.startswith('model_0')]


def test_cli_resume_whose_model_loads_nothing_is_refused(cli, vg_root, tmp_path):
    """Issue 20/21: every model key renamed used to "resume at iteration 3" with random
    weights."""
    out = tmp_path / 'o'
    out.mkdir()
    torch.save({'model': {'renamed.{}.weight'.format(i): torch.zeros(2) for i in range(5)},
                'iteration': 3}, str(out / 'model_0000003.pth'))
    (out / 'last_checkpoint').write_text('model_0000003.pth')
    res = cli('--config-file', PREDCLS, '--data-dir', vg_root, '--skip-test', 'OUTPUT_DIR',
               str(out), *(TINY + ['SOLVER.MAX_ITER', '4']))
    line = _one_error_line(res)
    assert line.startswith('error: resume checkpoint {}: loaded 0 of '.format(
        out / 'model_0000003.pth'))
    assert 'resumed' not in res.stdout + res.stderr
    assert not (out / 'model_final.pth').exists()


def test_cli_detector_file_that_fills_nothing_is_refused(cli, vg_root, tmp_path):
    torch.save({'fc.weight': torch.zeros(3, 3)}, str(tmp_path / 'foreign.pth'))
    res = cli('--config-file', PREDCLS, '--data-dir', vg_root, '--skip-test', 'OUTPUT_DIR',
               str(tmp_path / 'o'), *(TINY + ['SOLVER.MAX_ITER', '2',
                                              'MODEL.PRETRAINED_DETECTOR_CKPT',
                                              str(tmp_path / 'foreign.pth')]))
    line = _one_error_line(res)
    assert 'MODEL.PRETRAINED_DETECTOR_CKPT {}: loaded 0 of'.format(
        tmp_path / 'foreign.pth') in line and 'pretrain_detector.py' in line


@pytest.mark.slow
def test_two_process_torchrun_gloo(vg_root, tmp_path):
    """scripts/train_relation.py on 2 gloo ranks, 4 iterations, validation and test: the
    recipe's collective timeout, barrier and teardown end to end (issue 21; was also a second
    job in tests/torch/test_dist_watchdog.py). One run cannot show a 1-in-7 abort gone:
    bench/sgg_torchrun_clean_exit.py runs 20 (20 of 20 clean, 3 of 20 aborted before)."""
    args = _argv(vg_root, tmp_path, 'SOLVER.MAX_ITER', '4', 'SOLVER.VAL_PERIOD', '4',
                 'SOLVER.CHECKPOINT_PERIOD', '4')
    args.remove('--skip-test')
    res = torchrun(os.path.join(REPO, 'scripts', 'train_relation.py'), args, timeout=400,
                   env=dist_env(PYTHONPATH=REPO))
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-4000:]
    # a clean teardown: the abort the bench counts is C++'s "terminate called ..." at exit
    assert 'terminate called' not in out, out[-4000:]
    assert 'Using 2 processes' in (tmp_path / 'log.txt').read_text()
    final = torch.load(str(tmp_path / 'model_final.pth'), weights_only=True)
    assert final['iteration'] == 4
    # the evaluation block is printed once per evaluation (rank 0): validation + test
    assert out.count('SGG eval:     R @ 20') == 2
