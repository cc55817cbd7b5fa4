"""Datasets: generated VOC / COCO / Visual Genome / seamseg ISS data in the real on-disk formats, and
validators that explain what is wrong with a dataset before a trainer reads it.

This package imports neither MXNet, PyTorch nor gluoncv.
"""
from . import checks, synthetic, vg
from .checks import DatasetError, check_coco, check_voc
from .vg_checks import check_vg
from .vg import load_vg, load_vg_vocab

__all__ = ['synthetic', 'checks', 'vg', 'DatasetError', 'check_voc', 'check_coco', 'check_vg',
           'load_vg', 'load_vg_vocab']
