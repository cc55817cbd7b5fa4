"""seamseg's train_detection command line, with both local-rank spellings and LOCAL_RANK."""
import pytest

from gluontrain.torch.frcnn.args import parse_args


def test_defaults_are_seamseg(monkeypatch):
    monkeypatch.delenv('LOCAL_RANK', raising=False)
    args = parse_args(['cfg.ini', 'data'])
    assert (args.config, args.data, args.log_dir, args.resume, args.eval, args.pre_train,
            args.local_rank) == ('cfg.ini', 'data', '.', None, False, None, 0)


@pytest.mark.parametrize('flag', ['--local_rank', '--local-rank'])
def test_both_local_rank_spellings(flag, monkeypatch):
    monkeypatch.setenv('LOCAL_RANK', '5')
    assert parse_args([flag, '3', 'c', 'd']).local_rank == 3  # the flag wins


def test_local_rank_from_torchrun_env(monkeypatch):
    monkeypatch.setenv('LOCAL_RANK', '1')
    assert parse_args(['c', 'd']).local_rank == 1


def test_pre_train_and_resume(monkeypatch):
    args = parse_args(['--pre_train', 'a.pth.tar', 'body:b.pth.tar', '--', 'c', 'd'])
    assert args.pre_train == ['a.pth.tar', 'body:b.pth.tar']
    args = parse_args(['--resume', 'm.pth.tar', '--eval', '--log_dir', 'L', 'c', 'd'])
    assert (args.resume, args.eval, args.log_dir) == ('m.pth.tar', True, 'L')
    # seamseg's assert sits in the no-resume-no-pre_train branch: --eval with --pre_train passes
    assert parse_args(['--eval', '--pre_train', 'p.pth.tar', '--', 'c', 'd']).eval


@pytest.mark.parametrize('argv, words', [
    (['--resume', 'a', '--pre_train', 'b', '--', 'c', 'd'], 'mutually exclusive'),
    (['--eval', 'c', 'd'], '--eval needs --resume FILE or --pre_train'),
    (['c'], 'required'),
])
def test_bad_combinations_exit_with_usage(argv, words, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert words in capsys.readouterr().err


def test_negative_seed_is_a_usage_error(capsys):
    # numpy refuses it later with a message naming no argument
    with pytest.raises(SystemExit) as exc:
        parse_args(['--seed', '-1', 'c', 'd'])
    assert exc.value.code == 2
    assert 'argument --seed: -1 is negative; give an integer >= 0' in capsys.readouterr().err
