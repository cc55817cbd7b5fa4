"""Helpers for YOLOv3 recipe tests: tiny mobilenet0.25 runs on generated data."""
import pytest


def tiny_argv(prefix, root, *extra, dataset='voc'):
    """Arguments for a fast CPU run (mobilenet0.25, 160 px, batch 4, no workers)."""
    return ['--network', 'mobilenet0.25', '--dataset', dataset, '--dataset-root', str(root),
            '--no-pretrained-base', '--gpus', '', '--batch-size', '4', '-j', '0',
            '--data-shape', '160', '--no-random-shape', '--log-interval', '1',
            '--save-prefix', str(prefix) + '/'] + list(extra)


@pytest.fixture
def argv_for(tmp_path):
    def make(root, *extra, dataset='voc', sub='run'):
        out = tmp_path / sub
        out.mkdir(exist_ok=True)
        return tiny_argv(out, root, *extra, dataset=dataset)
    return make
