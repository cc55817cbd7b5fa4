"""The recipe registry and the contract's signatures (the seeds')."""
import inspect
import os
import re
import subprocess
import sys

import pytest

import gluontrain
from gluontrain.registry import CONTRACT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SEED_SIGNATURES = {
    'get_dataset': ['dataset', 'args'],
    'get_dataloader': ['net', 'train_dataset', 'val_dataset', 'data_shape', 'batch_size',
                       'num_workers', 'args'],
    'train': ['net', 'train_data', 'val_data', 'eval_metric', 'ctx', 'args'],
    'validate': ['net', 'val_data', 'ctx', 'eval_metric'],
    'save_params': ['net', 'best_map', 'current_map', 'epoch', 'save_interval', 'prefix'],
}


@pytest.mark.parametrize('name', gluontrain.list_recipes())
def test_recipes_have_the_contract_with_seed_signatures(name):
    recipe = gluontrain.get_recipe(name)
    assert all(callable(getattr(recipe, f)) for f in CONTRACT)
    for name, params in SEED_SIGNATURES.items():
        got = list(inspect.signature(getattr(recipe, name)).parameters)
        assert got[:len(params)] == params, name


def test_unknown_recipe_lists_known_ones():
    with pytest.raises(KeyError) as info:
        gluontrain.get_recipe('nope')
    assert 'known recipes: {}'.format(', '.join(gluontrain.list_recipes())) in str(info.value)


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


def _section(path, heading):
    """The text of the ``## heading`` section of a markdown file of the repository."""
    with open(os.path.join(ROOT, path), encoding='utf-8') as f:
        text = f.read()
    start = text.index('\n## {}\n'.format(heading))
    end = text.find('\n## ', start + 1)
    return text[start:end if end >= 0 else len(text)]


def _documented_modules():
    """``{module: row}`` of the module table of docs/recipes.md, "Adding a recipe"."""
    rows = re.findall(r'^\| `(\w+)\.py` \|(.*)\|$', _section('docs/recipes.md', 'Adding a recipe'),
                      re.M)
    return dict(rows)


def _present(folder, module):
    return os.path.isfile(os.path.join(folder, module + '.py')) or os.path.isfile(
        os.path.join(folder, module, '__init__.py'))


@pytest.mark.parametrize('name', gluontrain.list_recipes())
def test_every_recipe_package_has_the_same_layout(name):
    folder = os.path.dirname(gluontrain.get_recipe(name).__file__)
    assert [m for m in RECIPE_LAYOUT if not _present(folder, m)] == [], folder
    assert [m for m in RETIRED_NAMES if _present(folder, m)] == [], folder


@pytest.mark.parametrize('name', gluontrain.list_recipes())
def test_every_recipe_has_the_modules_adding_a_recipe_lists(name):
    folder = os.path.dirname(gluontrain.get_recipe(name).__file__)
    assert [m for m in _documented_modules() if not _present(folder, m)] == [], folder


def test_adding_a_recipe_lists_the_checked_layout_and_contract():
    modules = _documented_modules()
    assert set(modules) == set(RECIPE_LAYOUT) | {'__init__'}
    assert tuple(re.findall(r'`(\w+)`', modules['recipe'])) == CONTRACT


def _layout_names(text):
    """The dotted package names of a markdown text, ``gluontrain.x (`.a`, `.b`)`` expanded."""
    names = set(re.findall(r'`(gluontrain(?:\.\w+)*)`', text))
    for parent, subs in re.findall(r'`(gluontrain(?:\.\w+)*)` \(([^)]*)\)', text):
        names.update(parent + sub for sub in re.findall(r'`(\.[\w.]+)`', subs))
    return names


def test_readme_and_the_recipe_doc_name_every_package_and_recipe():
    packages = {os.path.relpath(folder, ROOT).replace(os.sep, '.')
                for folder, _, files in os.walk(os.path.join(ROOT, 'gluontrain'))
                if '__init__.py' in files} - {'gluontrain'}
    readme = _section('README.md', 'Layout')
    with open(os.path.join(ROOT, 'docs', 'recipes.md'), encoding='utf-8') as f:
        doc = f.read()
    assert sorted(packages - _layout_names(readme)) == [], 'README.md, Layout'
    assert sorted(packages - _layout_names(doc)) == [], 'docs/recipes.md'
    with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
        whole_readme = f.read()
    for text, where in ((whole_readme, 'README.md'), (doc, 'docs/recipes.md')):
        missing = [r for r in gluontrain.list_recipes()
                   if '`{}`'.format(r) not in text and '| {} |'.format(r) not in text]
        assert missing == [], where
