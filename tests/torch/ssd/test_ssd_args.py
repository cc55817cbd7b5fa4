"""SSD arguments: impossible values are refused while parsing (one argparse line naming the
argument), output and budget problems before anything is read (issue 21)."""
import pytest

from gluontrain.torch.ssd.args import parse_args
from gluontrain.torch.ssd.recipe import check_args, main


@pytest.mark.parametrize('argv, message', [
    (['--batch_size', '0'], 'argument --batch_size: 0 trains nothing; give an integer >= 1'),
    (['--batch_size', '-4'], 'argument --batch_size: -4 trains nothing'),
    (['--max_iter', '-5'], 'argument --max_iter: -5 trains nothing'),
    (['--start_iter', '-1'], 'argument --start_iter: -1 is negative; give an integer >= 0'),
    (['--num_workers', '-2'], 'argument --num_workers: -2 is negative'),
    (['--val_interval', '-1'], 'argument --val_interval: -1 is negative'),
    (['--log_interval', '-10'], 'argument --log_interval: -10 is negative'),
    (['--save_interval', '-1'], 'argument --save_interval: -1 is negative'),
    (['--width_mult', '0'], 'argument --width_mult: 0 is not > 0'),
    (['--momentum', 'nan'], 'argument --momentum: nan is not a finite number >= 0'),
    (['--weight_decay', '-1'], 'argument --weight_decay: -1 is not a finite number >= 0'),
    (['--gamma', 'x'], "argument --gamma: 'x' is not a number"),
    (['--seed', '-1'], 'argument --seed: -1 is negative'),
])
def test_impossible_values_are_one_usage_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and 'Traceback' not in err


def test_zero_intervals_keep_their_documented_meaning():
    # 0: validate after the last iteration only, no log lines, no periodic weights files
    args = parse_args(['--val_interval', '0', '--log_interval', '0', '--save_interval', '0'])
    assert (args.val_interval, args.log_interval, args.save_interval) == (0, 0, 0)


def test_save_folder_that_is_a_file_is_one_line(tmp_path):
    f = tmp_path / 'taken'
    f.write_text('x')
    with pytest.raises(ValueError, match=r'--save_folder .*taken: .*taken is an existing file, '
                                         r'not a folder; give a folder'):
        check_args(parse_args(['--save_folder', str(f)]))
    with pytest.raises(ValueError, match=r'taken is an existing file, so no folder can be made '
                                         r'under it'):
        check_args(parse_args(['--save_folder', str(f / 'sub')]))
    check_args(parse_args(['--save_folder', str(tmp_path / 'new' / 'sub')]))  # made later


def test_start_iter_past_the_budget_is_refused_before_reading_data(tmp_path):
    # the reference's range(start_iter, max_iter) is empty: it would save and exit 0
    with pytest.raises(ValueError, match=r'--start_iter 10 is not below the 10 iterations to '
                                         r'train \(--max_iter\)'):
        main(['--start_iter', '10', '--max_iter', '10', '--save_folder', str(tmp_path / 'o'),
              '--dataset_root', str(tmp_path / 'missing')])
    assert not (tmp_path / 'o').exists()


def test_resume_folder_or_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'^--resume .* is a folder, not a file; pass the '
                                                r'ssd300_VOC_last.ckpt'):
        check_args(parse_args(['--resume', str(tmp_path), '--save_folder', str(tmp_path)]))
    with pytest.raises(FileNotFoundError, match=r'^--resume .*nope.ckpt does not exist'):
        check_args(parse_args(['--resume', str(tmp_path / 'nope.ckpt'),
                               '--save_folder', str(tmp_path)]))
