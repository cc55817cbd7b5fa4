"""The four ``--preset`` values equal the GluonCV model zoo's own training runs, argument by
argument: the Namespace line of each zoo training log (dmlc/web-data, recorded verbatim in
tests/fixtures/zoo_logs/yolo3_zoo_logs.json with its path and commit). Both backends parse
the same arguments (gluontrain.yolo3.args), so this holds for both (issue 41, item 4)."""
import ast
import json
import os
import re

import pytest

from gluontrain.yolo3.args import PRESETS, build_parser, parse_args

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'fixtures',
                       'zoo_logs', 'yolo3_zoo_logs.json')
# what the zoo's machine or the script filled in, not a choice of the run
NOT_ARGUMENTS = {'gpus': 'the machine (8 GPUs there)',
                 'save_prefix': 'the script appends the model name to it before logging',
                 'num_samples': 'the script sets it to the training set size before logging'}


def _zoo():
    with open(FIXTURE) as f:
        return json.load(f)['logs']


def _namespace(line):
    """``{name: value}`` of a logged ``Namespace(a=1, b='x', ...)``."""
    call = ast.parse(line, mode='eval').body
    assert isinstance(call, ast.Call) and call.func.id == 'Namespace'
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords}


def test_the_fixture_holds_the_four_zoo_runs():
    assert sorted(_zoo()) == sorted(PRESETS) == ['darknet53_coco', 'darknet53_voc',
                                                 'mobilenet1.0_coco', 'mobilenet1.0_voc']


@pytest.mark.parametrize('name', sorted(PRESETS))
def test_preset_equals_the_zoo_log_argument_by_argument(name):
    logged = _namespace(_zoo()[name]['namespace'])
    args = vars(parse_args(['--preset', name]))
    differ = {k: (v, args.get(k, '<no such argument>')) for k, v in logged.items()
              if k not in NOT_ARGUMENTS and args.get(k, '<no such argument>') != v}
    assert not differ, differ
    # the network and dataset of the log's own name
    assert (args['network'], args['dataset']) == tuple(name.split('_'))


@pytest.mark.parametrize('name', sorted(PRESETS))
def test_arguments_the_log_predates_keep_what_the_run_did(name):
    """Arguments newer than the log: the mixup / smoothing / no-wd switches and the LR mode
    did not exist, so the run had them off (today's defaults); the warm-up was hard-coded and
    its length is read from the log's first LR: ``lr x 99 / (warmup x batches per epoch)``
    at batch 99, batches = num_samples // batch_size (rollover)."""
    zoo = _zoo()[name]
    logged = _namespace(zoo['namespace'])
    args = vars(parse_args(['--preset', name]))
    defaults = vars(build_parser().parse_args([]))
    newer = sorted(set(args) - set(logged))
    for key in ('mixup', 'label_smooth', 'no_wd', 'lr_mode', 'no_random_shape',
                'lr_decay_period', 'warmup_lr', 'no_mixup_epochs'):
        if key in newer:
            assert args[key] == defaults[key], key
    lr = float(re.search(r'LR: ([0-9.E+-]+)', zoo['first_batch']).group(1))
    batches = logged['num_samples'] // logged['batch_size']
    warmup = logged['lr'] * 99 / (lr * batches)
    assert abs(warmup - round(warmup)) < 0.02, warmup  # the 3-digit print of the LR
    assert args['warmup_epochs'] == round(warmup)
    if 'warmup_epochs' in logged:
        assert logged['warmup_epochs'] == round(warmup)


def test_arguments_on_the_command_line_still_win_over_a_preset():
    args = parse_args(['--epochs', '3', '--preset', 'mobilenet1.0_coco', '-j', '0',
                       '--lr-decay-epoch', '2', '--mixup'])
    assert (args.network, args.epochs, args.num_workers, args.lr_decay_epoch, args.mixup,
            args.label_smooth) == ('mobilenet1.0', 3, 0, '2', True, False)
