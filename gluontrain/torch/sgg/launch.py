"""The process set-up of Scene-Graph-Benchmark's tools (``relation_train_net.py``,
``detector_pretrain_net.py``) before their ``train()``: the device of ``MODEL.DEVICE``
(:func:`get_contexts`) and SGB's logger (:func:`setup_logger`, ``OUTPUT_DIR/log.txt``); a
``torchrun`` job's process group is :func:`gluontrain.torch.distributed.init_distributed`'s.
"""
import logging
import os

import torch

from ...core.writers import LogFileHandler

__all__ = ['get_contexts', 'setup_logger']


def get_contexts(cfg, local_rank=0):
    """``MODEL.DEVICE``: ``cuda:<local_rank>`` for 'cuda' (an error without CUDA), else the
    CPU."""
    if cfg.MODEL.DEVICE.startswith('cuda'):
        if not torch.cuda.is_available():
            raise ValueError("MODEL.DEVICE is 'cuda' but CUDA is not available: pass "
                             "MODEL.DEVICE cpu")
        return [torch.device('cuda', local_rank)]
    return [torch.device(cfg.MODEL.DEVICE)]


def setup_logger(output_dir, rank, name='log.txt'):
    """SGB's ``setup_logger``: the 'gluontrain.sgg' logger to stdout and
    ``OUTPUT_DIR/log.txt`` on rank 0."""
    logger = logging.getLogger('gluontrain.sgg')
    logger.setLevel(logging.INFO)
    if rank != 0 or getattr(logger, '_sgg_setup', None) == output_dir:
        return logger
    for h in list(logger.handlers):
        logger.removeHandler(h)
        h.close()
    fmt = logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s")
    handlers = [logging.StreamHandler()]
    if output_dir:
        # SGB appends to log.txt; a full disk is one error naming the file (core.writers)
        handlers.append(LogFileHandler(os.path.join(output_dir, name), mode='a'))
    for h in handlers:
        h.setFormatter(fmt)
        logger.addHandler(h)
    logger.propagate = False
    logger._sgg_setup = output_dir  # pylint: disable=protected-access
    return logger
