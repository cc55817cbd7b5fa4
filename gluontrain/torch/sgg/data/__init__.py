"""Scene-Graph-Benchmark's data pipeline: ``VGDataset``, transforms, frequency statistics,
samplers, batch collation (:mod:`gluontrain.torch.twostage.images`) and
``make_data_loader``."""
from .build import build_dataset, dataset_args, make_data_loader
from .collate import BatchCollator
from .statistics import get_dataset_statistics, get_statistics, statistics_dict
from .transforms import build_transforms
from .vg_dataset import VGDataset

__all__ = ['VGDataset', 'build_transforms', 'get_statistics', 'statistics_dict',
           'get_dataset_statistics', 'BatchCollator',
           'build_dataset', 'dataset_args', 'make_data_loader']
