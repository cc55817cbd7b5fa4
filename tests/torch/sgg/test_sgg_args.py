"""SGB's command line: --config-file, --local_rank / --local-rank / $LOCAL_RANK, --skip-test,
--data-dir anywhere, opts."""
import pytest

from gluontrain.torch.sgg.args import config_from_args, parse_args
from gluontrain.torch.sgg.config import CONFIGS_DIR

CFG = CONFIGS_DIR + '/predcls_motifs_cpu.yaml'


def test_local_rank_spellings(monkeypatch):
    monkeypatch.delenv('LOCAL_RANK', raising=False)
    assert parse_args(['--config-file', CFG]).local_rank == 0
    assert parse_args(['--config-file', CFG, '--local_rank', '2']).local_rank == 2
    assert parse_args(['--config-file', CFG, '--local-rank=3']).local_rank == 3
    monkeypatch.setenv('LOCAL_RANK', '1')
    assert parse_args(['--config-file', CFG]).local_rank == 1


def test_opts_data_dir_and_skip_test_after_opts():
    args = parse_args(['--config-file', CFG, 'SOLVER.MAX_ITER', '7', '--data-dir', '/d',
                       '--skip-test', 'OUTPUT_DIR', 'o'])
    assert args.opts == ['SOLVER.MAX_ITER', '7', 'OUTPUT_DIR', 'o']
    assert args.data_dir == '/d' and args.skip_test
    cfg = config_from_args(args)
    assert cfg.SOLVER.MAX_ITER == 7 and cfg.DATASETS.DATA_DIR == '/d' and cfg.OUTPUT_DIR == 'o'
    assert cfg.MODEL.ROI_RELATION_HEAD.USE_GT_OBJECT_LABEL is True


def test_config_file_required():
    with pytest.raises(SystemExit):
        parse_args([])
