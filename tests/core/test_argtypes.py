"""argparse type functions: refusals name the argument through argparse, values keep their type."""
import argparse

import pytest

from gluontrain.core.argtypes import finite_non_negative_float, int_list, multiple_of, positive_int


def _parser():
    p = argparse.ArgumentParser(prog='prog')
    p.add_argument('--lr', type=finite_non_negative_float, default=0.001)
    p.add_argument('--epochs', type=positive_int, default=3)
    p.add_argument('--data-shape', type=multiple_of(32, 'the stride'), default=416)
    p.add_argument('--steps', type=int_list, default='160,180')
    return p


def test_good_values_and_defaults_keep_their_reference_types():
    args = _parser().parse_args(['--lr', '0', '--epochs', '1', '--data-shape', '32',
                                 '--steps', '3, 7'])
    assert (args.lr, args.epochs, args.data_shape, args.steps) == (0.0, 1, 32, '3,7')
    assert _parser().parse_args([]).steps == '160,180'


@pytest.mark.parametrize('argv,message', [
    (['--lr', 'nan'], 'argument --lr: nan is not a finite number >= 0'),
    (['--lr', 'inf'], 'argument --lr: inf is not a finite number >= 0'),
    (['--lr', '-0.1'], 'argument --lr: -0.1 is not a finite number >= 0'),
    (['--lr', 'fast'], "argument --lr: 'fast' is not a number"),
    (['--epochs', '-1'], 'argument --epochs: -1 trains nothing; give an integer >= 1'),
    (['--epochs', '0'], 'argument --epochs: 0 trains nothing'),
    (['--data-shape', '100'],
     'argument --data-shape: 100 is not a multiple of 32 (the stride); use 96 or 128'),
    (['--data-shape', '10'], 'argument --data-shape: 10 is not a multiple of 32 (the stride); '
                             'use 32 or 64'),
    (['--steps', 'a,b'], "argument --steps: 'a,b' is not a comma-separated list of integers "
                         "(e.g. 160,180): 'a', 'b' are not non-negative integers"),
    (['--steps', '160,'], "'' is not a non-negative integer"),
])
def test_refusals_are_one_argparse_error_line_naming_the_argument(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        _parser().parse_args(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    (line,) = [l for l in err.splitlines() if 'error:' in l]
    assert line.startswith('prog: error: ') and message in line


def test_resolve_local_rank_flag_then_env_then_zero(monkeypatch):
    import argparse

    from gluontrain.core.argtypes import resolve_local_rank
    parser = argparse.ArgumentParser()
    parser.add_argument('--local_rank', '--local-rank', type=int, default=None)
    monkeypatch.setenv('LOCAL_RANK', '3')
    assert resolve_local_rank(parser.parse_args(['--local-rank', '1']), parser).local_rank == 1
    assert resolve_local_rank(parser.parse_args([]), parser).local_rank == 3
    monkeypatch.delenv('LOCAL_RANK')
    assert resolve_local_rank(parser.parse_args([]), parser).local_rank == 0
    monkeypatch.setenv('LOCAL_RANK', 'x')
    with pytest.raises(SystemExit):
        resolve_local_rank(parser.parse_args([]), parser)
