"""Isolation of the tests that import Scene-Graph-Benchmark's own code from the mirror.

Several test modules (data, model, predictors, evaluation) write parts of SGB's
``maskrcnn_benchmark`` package into their own temporary folder and import it; whichever ran
first would otherwise stay in ``sys.modules`` and hide the next module's copy
(``ModuleNotFoundError: maskrcnn_benchmark.modeling`` when the suite runs together).
"""
import sys

import pytest


@pytest.fixture(autouse=True, scope='module')
def _fresh_sgb_package():
    """Forget any imported ``maskrcnn_benchmark`` before and after each test module."""
    def purge():
        for name in [m for m in sys.modules if m.split('.')[0] == 'maskrcnn_benchmark']:
            del sys.modules[name]
    purge()
    yield
    purge()
