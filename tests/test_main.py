"""The command line: gluontrain train yolo3 / scripts/train_yolov3.py."""
import os
import subprocess
import sys

from gluontrain.__main__ import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_usage_for_unknown_recipe(capsys):
    assert main(['train', 'nope']) == 2
    assert 'usage: gluontrain train {ssd,yolo3}' in capsys.readouterr().err


def test_bad_input_exits_1_with_a_message(capsys, tmp_path):
    code = main(['train', 'yolo3', '--gpus', '', '--network', 'mobilenet0.25',
                 '--no-pretrained-base', '--dataset-root', str(tmp_path / 'missing')])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith('error: ') and 'missing' in err


def test_script_runs_a_tiny_training_and_prints_the_final_map(voc_root, tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS='1')
    res = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'scripts', 'train_yolov3.py'), '--network',
         'mobilenet0.25', '--dataset', 'voc', '--dataset-root', voc_root, '--gpus', '',
         '--no-pretrained-base', '--batch-size', '8', '-j', '0', '--data-shape', '128',
         '--no-random-shape', '--epochs', '1', '--save-prefix', str(tmp_path) + '/'],
        capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert 'final validation mAP: ' in res.stdout
    assert '[Epoch 0] Validation: ' in res.stdout
