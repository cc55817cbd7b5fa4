"""Helpers for YOLOv3 recipe tests: tiny mobilenet0.25 runs on generated data."""
import pytest


def tiny_argv(prefix, root, *extra, dataset='voc', plots=False):
    """Arguments for a fast CPU run (mobilenet0.25, 160 px, batch 4, no workers).

    ``--no-plots`` unless ``plots``: the curves and samples pictures are ~1.4 s of CPU per
    run (matplotlib), 15 % of such a run, and only the tests that look at them draw them
    (tests/mx/yolo3/test_val_samples.py, the two-epoch files test).
    """
    return ['--network', 'mobilenet0.25', '--dataset', dataset, '--dataset-root', str(root),
            '--no-pretrained-base', '--gpus', '', '--batch-size', '4', '-j', '0',
            '--data-shape', '160', '--no-random-shape', '--log-interval', '1',
            '--save-prefix', str(prefix) + '/'] + ([] if plots else ['--no-plots']) + list(extra)


@pytest.fixture
def argv_for(tmp_path):
    def make(root, *extra, dataset='voc', sub='run', plots=False):
        out = tmp_path / sub
        out.mkdir(exist_ok=True)
        return tiny_argv(out, root, *extra, dataset=dataset, plots=plots)
    return make
