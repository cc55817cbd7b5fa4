"""The recipe registry: ``get_recipe('yolo3')`` returns the module that implements a recipe.

Every recipe module provides the same functions (the contract, see docs/recipes.md), so that
scripts, the ``gluontrain`` CLI and notebooks drive any recipe the same way. Modules are
imported on first use, so asking for a PyTorch recipe never imports MXNet and vice versa.
"""
import importlib
import sys

# the functions every recipe module provides, with the seeds' signatures
CONTRACT = ('parse_args', 'get_dataset', 'get_dataloader', 'get_net', 'train', 'validate',
            'save_params', 'main')

_RECIPES = {'yolo3': 'gluontrain.mx.yolo3', 'yolo3-torch': 'gluontrain.torch.yolo3', 'ssd': 'gluontrain.torch.ssd',
            'frcnn': 'gluontrain.torch.frcnn', 'sgg': 'gluontrain.torch.sgg.recipe',
            'sgg-detector': 'gluontrain.torch.sgg.detector_recipe'}
# one line each for ``gluontrain --help`` (read without importing the recipes: MXNet and
# PyTorch load in seconds, and a machine may have only one of them)
_SUMMARIES = {
    'yolo3': "YOLOv3 on MXNet, GluonCV's train_yolo3.py (scripts/train_yolov3.py)",
    'yolo3-torch': "YOLOv3 on PyTorch, the same recipe and command line as yolo3 "
                   "(scripts/train_yolov3.py --backend torch)",
    'ssd': "SSD300 on PyTorch, ssd.pytorch's train.py (scripts/train_ssd.py)",
    'frcnn': "seamseg's two-stage detector on PyTorch, its train_detection.py with .ini "
             "configs (scripts/train_detection.py)",
    'sgg': "Scene-Graph-Benchmark's relation training on PyTorch, yacs configs "
           "(scripts/train_relation.py)",
    'sgg-detector': "Scene-Graph-Benchmark's detector pre-training on PyTorch "
                    "(scripts/pretrain_detector.py)",
}


# what a recipe's import needs that an install may lack, and how to get it (README, set-up)
_INSTALLS = {
    'mxnet': "README command (a): pip install -r requirements/stack-py311.txt, then "
             "pip install --no-deps gluoncv==0.10.5.post0 -e .",
    'torch': "pip install -e '.[torch]' (README command (c))",
}
_INSTALLS['gluoncv'] = _INSTALLS['mxnet']
for _name in ('yacs', 'cv2', 'pycocotools', 'matplotlib'):
    _INSTALLS[_name] = _INSTALLS['torch']
# the newest Python the MXNet stack runs on: mxnet 1.9.1 needs numpy 1.x (no wheel for 3.13)
# and gluoncv 0.10.5 imports distutils (gone in 3.12); setup.py, README "Set-up"
MXNET_MAX_PYTHON = (3, 11)


def mxnet_python_refusal(version=None):
    """The one line saying that the MXNet backend cannot run on Python ``version`` (default:
    this one) and what to use instead, or ``None`` where it can (Python <= 3.11)."""
    version = tuple(sys.version_info[:2] if version is None else version)
    if version <= MXNET_MAX_PYTHON:
        return None
    return ('the MXNet backend (--backend mxnet, gluontrain.mx) needs Python <= 3.11 (MXNet '
            '1.9.1 and GluonCV 0.10.5 need numpy 1.x and distutils), this is Python {}.{}: '
            'use --backend torch, or a Python 3.11 venv with README command (a)'.format(*version))


# another way to run a recipe when its framework is missing
_ALTERNATIVES = {'yolo3': 'or train YOLOv3 on PyTorch with --backend torch (recipe yolo3-torch)'}


class RecipeUnavailable(ImportError):
    """A recipe's framework or library is not installed; the message names it and the install
    command."""


# recipes whose command line picks the backend: (recipe, --backend value) -> recipe to run
_BACKEND_ROUTES = {('yolo3', 'torch'): 'yolo3-torch', ('yolo3', 'mxnet'): 'yolo3'}


def route(name, argv):
    """The recipe that runs ``name`` with arguments ``argv``: ``yolo3`` with
    ``--backend torch`` is ``yolo3-torch`` (the last ``--backend`` wins, as in argparse)."""
    backend = None
    for i, arg in enumerate(argv):
        if arg == '--backend' and i + 1 < len(argv):
            backend = argv[i + 1]
        elif arg.startswith('--backend='):
            backend = arg.split('=', 1)[1]
    return _BACKEND_ROUTES.get((name, backend), name)


def recipe_summary(name):
    """The one-line description of recipe ``name`` ('' when it has none)."""
    return _SUMMARIES.get(name, '')


def list_recipes():
    """Names of the registered recipes, sorted."""
    return sorted(_RECIPES)


def get_recipe(name):
    """Import and return the module of recipe ``name``.

    Raises
    ------
    KeyError
        For an unknown name (the message lists the known ones).
    RecipeUnavailable
        When a library the recipe imports (mxnet, gluoncv, torch, yacs, ...) is not installed:
        the message names it and how to install it; for an MXNet recipe on Python >= 3.12,
        :func:`mxnet_python_refusal`'s line.
    TypeError
        When the module lacks a function of the contract.
    """
    if name not in _RECIPES:
        raise KeyError('unknown recipe {!r}; known recipes: {}'.format(
            name, ', '.join(list_recipes())))
    refusal = mxnet_python_refusal()
    if refusal and _RECIPES[name].startswith('gluontrain.mx.'):
        raise RecipeUnavailable('recipe {!r}: {}'.format(name, refusal))
    try:
        module = importlib.import_module(_RECIPES[name])
    except ModuleNotFoundError as e:
        library = (e.name or '').split('.')[0]
        if library not in _INSTALLS:
            raise
        raise RecipeUnavailable('recipe {!r} needs {}, which is not installed here: {}{}'.format(
            name, library, _INSTALLS[library],
            '; ' + _ALTERNATIVES[name] if name in _ALTERNATIVES else '')) from e
    missing = [f for f in CONTRACT if not callable(getattr(module, f, None))]
    if missing:
        raise TypeError('recipe {!r} ({}) lacks {}'.format(name, _RECIPES[name], missing))
    return module
