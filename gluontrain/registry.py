"""The recipe registry: ``get_recipe('yolo3')`` returns the module that implements a recipe.

Every recipe module provides the same functions (the contract, see docs/recipes.md), so that
scripts, the ``gluontrain`` CLI and notebooks drive any recipe the same way. Modules are
imported on first use, so asking for a PyTorch recipe never imports MXNet and vice versa.
"""
import importlib

# the functions every recipe module provides, with the seeds' signatures
CONTRACT = ('parse_args', 'get_dataset', 'get_dataloader', 'get_net', 'train', 'validate',
            'save_params', 'main')

_RECIPES = {'yolo3': 'gluontrain.mx.yolo3', 'ssd': 'gluontrain.torch.ssd',
            'frcnn': 'gluontrain.torch.frcnn', 'sgg': 'gluontrain.torch.sgg.recipe',
            'sgg-detector': 'gluontrain.torch.sgg.detector_recipe'}


def register_recipe(name, module):
    """Register ``module`` (a dotted path) under ``name``; re-registering replaces it."""
    _RECIPES[name] = module


def list_recipes():
    """Names of the registered recipes, sorted."""
    return sorted(_RECIPES)


def get_recipe(name):
    """Import and return the module of recipe ``name``.

    Raises
    ------
    KeyError
        For an unknown name (the message lists the known ones).
    TypeError
        When the module lacks a function of the contract.
    """
    if name not in _RECIPES:
        raise KeyError('unknown recipe {!r}; known recipes: {}'.format(
            name, ', '.join(list_recipes())))
    module = importlib.import_module(_RECIPES[name])
    missing = [f for f in CONTRACT if not callable(getattr(module, f, None))]
    if missing:
        raise TypeError('recipe {!r} ({}) lacks {}'.format(name, _RECIPES[name], missing))
    return module
