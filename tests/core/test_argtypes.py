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


# ----- issue 21

def test_non_negative_int_and_positive_float():
    from gluontrain.core.argtypes import non_negative_int, positive_float
    assert non_negative_int('0') == 0 and positive_float('0.25') == 0.25
    for fn, text, words in ((non_negative_int, '-1', '-1 is negative; give an integer >= 0'),
                            (non_negative_int, 'x', "'x' is not an integer"),
                            (positive_float, '0', '0 is not > 0'),
                            (positive_float, 'inf', 'inf is not a finite number >= 0')):
        with pytest.raises(argparse.ArgumentTypeError, match=words):
            fn(text)


def test_path_problem_tells_folder_file_and_missing_apart(tmp_path):
    from gluontrain.core.argtypes import check_input_file, output_dir_problem, path_problem
    f = tmp_path / 'f.txt'
    f.write_text('x')
    assert path_problem(str(f)) is None and path_problem(str(tmp_path), 'folder') is None
    assert path_problem(str(tmp_path)) == 'is a folder, not a file'
    assert path_problem(str(f), 'folder') == 'is a file, not a folder'
    assert path_problem(str(tmp_path / 'nope')) == 'does not exist'
    with pytest.raises(FileNotFoundError, match=r'^--resume .* is a folder, not a file; fix$'):
        check_input_file(str(tmp_path), '--resume', 'fix')
    assert output_dir_problem(str(tmp_path / 'a' / 'b')) is None
    assert output_dir_problem(str(f)) == '{} is an existing file, not a folder'.format(f)
    assert output_dir_problem(str(f / 'a' / 'b')) == \
        '{} is an existing file, so no folder can be made under it'.format(f)


def test_int_at_least_says_why():
    from gluontrain.core.argtypes import int_at_least
    parse = int_at_least(1, 'is not an interval')
    assert parse('3') == 3
    with pytest.raises(argparse.ArgumentTypeError, match=r'^0 is not an interval; give an '
                                                         r'integer >= 1$'):
        parse('0')
    with pytest.raises(argparse.ArgumentTypeError, match="'x' is not an integer"):
        parse('x')
