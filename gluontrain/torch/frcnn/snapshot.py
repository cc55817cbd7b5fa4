"""seamseg's snapshots (seamseg/utils/snapshot.py, train_detection.py).

File ``{log_dir}/model_last.pth.tar`` written every epoch, copied to ``model_best.pth.tar``
when validation improves::

    {'config': <the .ini text>,
     'state_dict': {'body', 'rpn_head', 'roi_head', 'optimizer', 'loss_meter',
                    'obj_loss_meter', 'bbx_loss_meter', 'roi_cls_loss_meter',
                    'roi_bbx_loss_meter'},
     'training_meta': {'epoch', 'last_score', 'best_score', 'global_step'}}

Written through a temporary file and a rename (seamseg writes in place), read with
``torch.load(weights_only=True)``.
"""
import os
import shutil

import torch

from gluontrain.core.checkpoint import atomic_save_file

from .config import config_to_string

__all__ = ['LAST', 'BEST', 'MODULES', 'METERS', 'save_snapshot', 'load_snapshot',
           'resume_from_snapshot', 'pre_train_from_snapshots', 'load_pretraining_dict',
           'copy_best']

LAST = 'model_last.pth.tar'
BEST = 'model_best.pth.tar'
MODULES = ('body', 'rpn_head', 'roi_head')
METERS = ('loss', 'obj_loss', 'bbx_loss', 'roi_cls_loss', 'roi_bbx_loss')


def save_snapshot(file, config, epoch, last_score, best_score, global_step, **state_dicts):
    """Write a seamseg snapshot atomically.

    Parameters
    ----------
    file : str
    config : configparser.ConfigParser or str
    epoch : int
        0-based epoch just finished.
    last_score, best_score : float
    global_step : int
    **state_dicts
        ``body=..., rpn_head=..., roi_head=..., optimizer=..., loss_meter=...``.
    """
    data = {'config': config if isinstance(config, str) else config_to_string(config),
            'state_dict': dict(state_dicts),
            'training_meta': {'epoch': epoch, 'last_score': last_score,
                              'best_score': best_score, 'global_step': global_step}}
    atomic_save_file(file, lambda tmp: torch.save(data, tmp))


def load_snapshot(file):
    """Read a snapshot (tensors, numbers and strings only).

    Raises
    ------
    FileNotFoundError, ValueError
        Missing file, or not a seamseg snapshot.
    """
    if not os.path.isfile(file):
        raise FileNotFoundError('snapshot {} does not exist: pass a {} or {} written by this '
                                'recipe (or seamseg)'.format(file, LAST, BEST))
    data = torch.load(file, map_location='cpu', weights_only=True)
    if not isinstance(data, dict) or not isinstance(data.get('state_dict'), dict):
        raise ValueError('{} is not a seamseg snapshot: expected a dict with "state_dict" '
                         '(and "training_meta", "config")'.format(file))
    return data


def load_pretraining_dict(module, state_dict):
    """seamseg's lenient load: drop entries whose shape differs from the module's, then
    ``load_state_dict(strict=False)``.

    Parameters
    ----------
    module : nn.Module
    state_dict : dict

    Returns
    -------
    list of str
        The dropped keys (seamseg drops them silently).
    """
    own = module.state_dict()
    state_dict = dict(state_dict)
    dropped = [k for k, v in own.items() if k in state_dict and v.shape != state_dict[k].shape]
    for k in dropped:
        del state_dict[k]
    module.load_state_dict(state_dict, strict=False)
    return dropped


def resume_from_snapshot(model, snapshot, modules=MODULES):
    """Load every module of ``modules`` from ``snapshot``; returns the snapshot dict.

    Raises
    ------
    KeyError
        The snapshot lacks one of ``modules`` (seamseg's behaviour).
    """
    data = load_snapshot(snapshot)
    for name in modules:
        if name not in data['state_dict']:
            raise KeyError("The given snapshot does not contain a state_dict for module '{}'"
                           .format(name))
        load_pretraining_dict(getattr(model, name), data['state_dict'][name])
    return data


def pre_train_from_snapshots(model, snapshots, modules=MODULES):
    """seamseg's ``--pre_train``: each entry ``path`` or ``module:path``, later ones
    overwrite earlier ones.

    Raises
    ------
    ValueError
        ``module`` is not one of ``modules``.
    """
    for entry in snapshots:
        head, sep, tail = entry.partition(':')
        # 'C:' drive letters and paths with a colon further on are not module prefixes
        if sep and len(head) > 1 and '/' not in head and '\\' not in head:
            module_name, path = head, tail
        else:
            module_name, path = None, entry
        data = load_snapshot(path)['state_dict']
        if module_name is None:
            for name in modules:
                if name in data:
                    load_pretraining_dict(getattr(model, name), data[name])
        elif module_name in modules:
            load_pretraining_dict(getattr(model, module_name), data[module_name])
        else:
            raise ValueError('Unrecognized network module {!r} in --pre_train {}; use one of {}'
                             .format(module_name, entry, ', '.join(modules)))


def copy_best(log_dir):
    """Copy ``model_last.pth.tar`` to ``model_best.pth.tar`` (atomically)."""
    src, dst = os.path.join(log_dir, LAST), os.path.join(log_dir, BEST)
    atomic_save_file(dst, lambda tmp: shutil.copyfile(src, tmp))
