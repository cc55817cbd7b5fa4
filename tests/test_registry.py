"""The recipe registry and the contract's signatures (the seeds')."""
import inspect
import os
import subprocess
import sys

import pytest

import gluontrain
from gluontrain.registry import CONTRACT

SEED_SIGNATURES = {
    'get_dataset': ['dataset', 'args'],
    'get_dataloader': ['net', 'train_dataset', 'val_dataset', 'data_shape', 'batch_size',
                       'num_workers', 'args'],
    'train': ['net', 'train_data', 'val_data', 'eval_metric', 'ctx', 'args'],
    'validate': ['net', 'val_data', 'ctx', 'eval_metric'],
    'save_params': ['net', 'best_map', 'current_map', 'epoch', 'save_interval', 'prefix'],
}


@pytest.mark.parametrize('name', ['yolo3', 'ssd', 'frcnn', 'sgg', 'sgg-detector'])
def test_recipes_have_the_contract_with_seed_signatures(name):
    recipe = gluontrain.get_recipe(name)
    assert all(callable(getattr(recipe, f)) for f in CONTRACT)
    for name, params in SEED_SIGNATURES.items():
        got = list(inspect.signature(getattr(recipe, name)).parameters)
        assert got[:len(params)] == params, name


def test_unknown_recipe_lists_known_ones():
    with pytest.raises(KeyError, match='known recipes: frcnn, sgg, sgg-detector, ssd, yolo3'):
        gluontrain.get_recipe('nope')


def test_incomplete_recipe_is_rejected(monkeypatch):
    monkeypatch.setitem(gluontrain.registry._RECIPES, 'half', 'gluontrain.core.loop')
    with pytest.raises(TypeError, match="lacks \\['parse_args'"):
        gluontrain.get_recipe('half')


def test_importing_gluontrain_and_listing_recipes_imports_no_framework():
    code = ('import sys, gluontrain; gluontrain.list_recipes(); '
            'sys.exit(any(m in sys.modules for m in ("mxnet", "torch", "gluoncv")))')
    assert subprocess.run([sys.executable, '-c', code]).returncode == 0


# every recipe package has the same files (issue #23: one layout for the four references);
# a sub-package (``data/``) counts as its file
RECIPE_LAYOUT = ('args', 'data', 'model', 'step', 'hooks', 'recipe', 'plots')
# names that meant different things from one recipe to the next
RETIRED_NAMES = ('train', 'main', 'engine')


@pytest.mark.parametrize('name', gluontrain.list_recipes())
def test_every_recipe_package_has_the_same_layout(name):
    folder = os.path.dirname(gluontrain.get_recipe(name).__file__)
    entries = set(os.listdir(folder))

    def present(module):
        return module + '.py' in entries or os.path.isfile(
            os.path.join(folder, module, '__init__.py'))

    assert [m for m in RECIPE_LAYOUT if not present(m)] == [], folder
    assert [m for m in RETIRED_NAMES if present(m)] == [], folder
