"""gluontrain: the classic detection training scripts as reusable, faithful, tested functions.

Importing ``gluontrain`` imports neither MXNet nor PyTorch; the backends live in
``gluontrain.mx`` and ``gluontrain.torch`` and are imported on demand.
"""
from ._version import __version__
from .registry import get_recipe, list_recipes

__all__ = ['__version__', 'get_recipe', 'list_recipes']
