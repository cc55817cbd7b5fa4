"""Scene-Graph-Benchmark's ``Checkpointer`` (``maskrcnn_benchmark/utils/checkpoint.py:13-149``).

Same files and semantics: ``{OUTPUT_DIR}/{name}.pth`` (``model_{iter:07d}``, ``model_final``),
a ``last_checkpoint`` text file naming the last one written, and ``load`` that prefers
``last_checkpoint`` over the file it is given (so a rerun of the same command resumes).
A ``.pth`` is a ``torch.save`` dict with SGB's keys ``model``, ``optimizer``, ``scheduler``
and the caller's extras (``iteration``), readable by SGB's own loader; a ``.pkl`` is a
Detectron Caffe2 body (:mod:`.modeling.c2_loading`).

What differs (the scheduler, RNG and hooks' state saved, staged writes, ``last_checkpoint``
relative to the output folder, ``weights_only`` loads): docs/faithfulness.md, "Scene-graph
training", "Deliberate differences"; what loads, with its report, and what is refused in one
line: docs/checkpoints.md, "Scene-Graph-Benchmark / maskrcnn-benchmark"."""
import logging
import os

import torch

from ...core import checkpoint as core_ckpt
from ...core.load_report import WeightsLoadError, guess_origin
from ..checkpoint import get_all_rng_states, save_file as save_torch_file, set_all_rng_states
from ..distributed import unwrap_model
from ..weights import read_weights_file
from .modeling.c2_loading import c2_body_state_dict, is_c2_file
from .modeling.load_mapping import load_state_dict_with_mapping

__all__ = ['Checkpointer', 'load_weights_file', 'LAST_CHECKPOINT', 'FIX_DETECTOR_CKPT',
           'FIX_WEIGHT', 'TWO_STAGE', 'refuse_remote']

#: The text file naming the last checkpoint (SGB's name).
LAST_CHECKPOINT = 'last_checkpoint'

#: What the errors about ``MODEL.PRETRAINED_DETECTOR_CKPT`` / ``MODEL.WEIGHT`` advise.
FIX_DETECTOR_CKPT = ('pass as MODEL.PRETRAINED_DETECTOR_CKPT the model_final.pth of '
                     'scripts/pretrain_detector.py (or of SGB\'s tools/detector_pretrain_net.py) '
                     'for this MODEL.BACKBONE / ROI_BOX_HEAD, or \'\' to start from scratch')
FIX_WEIGHT = ('pass as MODEL.WEIGHT a Scene-Graph-Benchmark / maskrcnn-benchmark detector or '
              'backbone .pth for this MODEL.BACKBONE, or \'\' to start from random weights')

#: How the errors name a seamseg / gluontrain ``frcnn`` snapshot.
TWO_STAGE = 'a seamseg / two-stage (frcnn) snapshot'


def _flat_keys(obj, prefix='', depth=2):
    """The dotted keys of nested dicts (``state_dict.body.mod1.conv1.weight``), for
    :func:`guess_origin` of a file that is no flat state dict."""
    keys = []
    for key, value in obj.items():
        name = '{}{}'.format(prefix, key)
        if isinstance(value, dict) and depth > 0 and value:
            keys += _flat_keys(value, name + '.', depth - 1)
        else:
            keys.append(name)
    return keys


def _is_two_stage(obj):
    """Whether ``obj`` is seamseg's ``model_last.pth.tar`` layout (``{'config', 'state_dict':
    {'body', 'rpn_head', 'roi_head', ...}, 'training_meta'}``), one of its modules' dicts or
    a state dict of its key names."""
    inner = obj.get('state_dict')
    if isinstance(inner, dict) and any(isinstance(inner.get(m), dict)
                                       for m in ('body', 'rpn_head', 'roi_head')):
        return True
    return 'two-stage (frcnn) snapshot' in (guess_origin(_flat_keys(obj)) or '')


def load_weights_file(path, what='checkpoint', fix='pass a .pth written by this recipe or by '
                      'Scene-Graph-Benchmark'):
    """Read a ``.pth`` as SGB's ``DetectronCheckpointer._load_file``: a dict with ``model``,
    or a bare state dict (wrapped as ``{'model': ...}``).

    Parameters
    ----------
    path : str
    what : str
        How the error names the file (e.g. ``'MODEL.PRETRAINED_DETECTOR_CKPT'``).
    fix : str
        What the error advises instead.

    Returns
    -------
    dict

    Raises
    ------
    FileNotFoundError
        A missing file.
    WeightsLoadError
        A file that is no torch weights file (empty, truncated, another format, a pickle of
        other objects), holds no dict, or is a seamseg / two-stage snapshot.
    """
    loaded = read_weights_file(path, what, fix)
    if not isinstance(loaded, dict):
        raise WeightsLoadError('{} {} holds a {}, not a state dict or checkpoint; {}'.format(
            what, path, type(loaded).__name__, fix))
    if _is_two_stage(loaded):
        raise WeightsLoadError(
            '{} {} is {} (config, state_dict of body / rpn_head / roi_head, as '
            'scripts/train_detection.py writes model_last.pth.tar), not a Scene-Graph-Benchmark '
            'checkpoint: its modules and names do not fit the scene-graph model; {}'.format(
                what, path, TWO_STAGE, fix))
    return loaded if 'model' in loaded else {'model': loaded}


#: maskrcnn-benchmark's ``ModelCatalog`` ImageNet names and where it downloads them from.
_C2_CATALOG = {'MSRA/R-50': 'MSRA/R-50', 'MSRA/R-50-GN': '47261647/R-50-GN',
               'MSRA/R-101': 'MSRA/R-101', 'MSRA/R-101-GN': '47592356/R-101-GN',
               'FAIR/20171220/X-101-32x8d': '20171220/X-101-32x8d'}
_DETECTRON_URL = 'https://dl.fbaipublicfiles.com/detectron/ImageNetPretrained/{}.pkl'


def refuse_remote(f, what):
    """Refuse a ``catalog://`` name or URL (SGB's checkpointer downloads them; nothing is
    downloaded here) with the address to fetch it from.

    Raises
    ------
    WeightsLoadError
        When ``f`` is such a name; nothing otherwise.
    """
    url = None
    if f.startswith('catalog://'):
        name = f[len('catalog://'):]
        key = name[len('ImageNetPretrained/'):] if name.startswith('ImageNetPretrained/') else None
        url = _DETECTRON_URL.format(_C2_CATALOG[key]) if key in _C2_CATALOG else None
        kind = 'a maskrcnn-benchmark model-zoo name'
    elif f.startswith(('http://', 'https://')):
        url, kind = f, 'a URL'
    else:
        return
    raise WeightsLoadError(
        '{} {} is {} that Scene-Graph-Benchmark downloads{}; this recipe downloads nothing: '
        'fetch the file and pass its path as {}, or \'\' to start without it'.format(
            what, f, kind, ' ({})'.format(url) if url and url != f else '', what))


def _c2_missing_statistics(key):
    # no Caffe2 file holds them: maskrcnn-benchmark keeps FrozenBatchNorm2d's initial 0 / 1
    return key.startswith('backbone.body.') and key.endswith(('.running_mean', '.running_var'))


class Checkpointer:
    """SGB's ``DetectronCheckpointer`` for the relation and detector trainings.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    model : torch.nn.Module
        DDP wrappers are unwrapped (the keys never carry ``module.``).
    optimizer, scheduler : optional
    save_dir : str
        ``OUTPUT_DIR``; '' disables saving (SGB).
    save_to_disk : bool
        Rank 0 only, as SGB.
    logger : logging.Logger, optional
    """

    def __init__(self, cfg, model, optimizer=None, scheduler=None, save_dir="",
                 save_to_disk=True, logger=None):
        self.cfg, self.model, self.optimizer, self.scheduler = cfg, model, optimizer, scheduler
        self.save_dir, self.save_to_disk = save_dir, save_to_disk
        self.logger = logger if logger is not None else logging.getLogger(__name__)
        self.last_report = None

    # ------------------------------------------------------------------ saving
    def save(self, name, hooks_state=None, **kwargs):
        """Write ``{save_dir}/{name}.pth`` and point ``last_checkpoint`` at it.

        Parameters
        ----------
        name : str
            E.g. ``'model_0000100'``, ``'model_final'``.
        hooks_state : dict, optional
            :func:`gluontrain.core.hooks.hooks_state_dict` of the run's hooks.
        **kwargs
            Stored under their names (SGB: ``iteration``).

        Returns
        -------
        str or None
            The path written (None when saving is off, as SGB).
        """
        if not self.save_dir or not self.save_to_disk:
            return None
        data = {'model': unwrap_model(self.model).state_dict()}
        if self.optimizer is not None:
            data['optimizer'] = self.optimizer.state_dict()
        if self.scheduler is not None:
            data['scheduler'] = self.scheduler.state_dict()
        data.update(kwargs)
        data['gluontrain'] = core_ckpt.dumps_state(dict(get_all_rng_states(),
                                                        hooks=hooks_state or {}))
        save_file = os.path.join(self.save_dir, "{}.pth".format(name))
        self.logger.info("Saving checkpoint to %s", save_file)
        save_torch_file(save_file, data)
        self.tag_last_checkpoint(save_file)
        return save_file

    def tag_last_checkpoint(self, last_filename):
        """Write the ``last_checkpoint`` file (the name relative to the output folder)."""
        name = os.path.relpath(last_filename, self.save_dir)
        core_ckpt.atomic_write(os.path.join(self.save_dir, LAST_CHECKPOINT),
                               lambda f: f.write(name), mode='w')

    # ------------------------------------------------------------------ loading
    def has_checkpoint(self):
        """Whether ``{save_dir}/last_checkpoint`` exists."""
        return bool(self.save_dir) and os.path.exists(os.path.join(self.save_dir, LAST_CHECKPOINT))

    def get_checkpoint_file(self):
        """The file ``last_checkpoint`` names ('' when it cannot be read)."""
        try:
            with open(os.path.join(self.save_dir, LAST_CHECKPOINT)) as f:
                last_saved = f.read().strip()
        except IOError:
            return ""
        if last_saved and not os.path.isabs(last_saved):
            in_dir = os.path.join(self.save_dir, last_saved)
            # SGB's own files hold OUTPUT_DIR/name.pth relative to the working directory
            if os.path.exists(in_dir) or not os.path.exists(last_saved):
                last_saved = in_dir
        return last_saved

    def load(self, f=None, with_optim=True, update_schedule=False, load_mapping=None,
             restore_scheduler=True, what='checkpoint', fix=None, required=()):
        """SGB's ``Checkpointer.load``: ``last_checkpoint`` wins over ``f``; what loaded is
        reported (:func:`.modeling.load_mapping.load_state_dict_with_mapping`).

        Parameters
        ----------
        f : str, optional
            A ``.pth`` (SGB: ``MODEL.PRETRAINED_DETECTOR_CKPT`` or ``MODEL.WEIGHT``).
        with_optim : bool
            Also restore optimizer and scheduler (and the RNG states).
        update_schedule : bool
            ``SOLVER.UPDATE_SCHEDULE_DURING_LOAD``: set the scheduler's ``last_epoch`` to the
            checkpoint's iteration.
        load_mapping : dict, optional
            ``{current module prefix: loaded module prefix}`` for SGB's longest-suffix key
            matching (:mod:`.modeling.load_mapping`).
        restore_scheduler : bool
            ``SOLVER.RESTORE_SCHEDULER`` (False: SGB, the schedule restarts).
        what : str
            How errors name ``f``.
        fix : str, optional
            What errors about ``f`` advise.
        required : tuple of str
            Module prefixes ``f`` must fill at least one tensor of (the relation training's
            frozen detector: ``backbone``, ``roi_heads.box``).

        Returns
        -------
        dict
            The remaining content (``iteration`` ...) and ``hooks`` (the hooks' state), or
            ``{}`` when there is nothing to load. :attr:`last_report` holds the model's
            :class:`~gluontrain.core.load_report.LoadReport`.

        Raises
        ------
        FileNotFoundError, WeightsLoadError
            One line naming the file: unreadable, another recipe's file (a two-stage
            snapshot), nothing of the model filled, a tensor of another shape, a resume that
            does not fill the whole model, an optimizer or scheduler state that does not fit.
        """
        self.last_report = None
        resume = self.has_checkpoint()
        if resume:
            # a resume must restore the whole model: strict, whatever f was
            f, what = self.get_checkpoint_file(), 'resume checkpoint'
            fix = ('{} names this file: point it at a model_XXXXXXX.pth written for this model '
                   '(same config), or pass another OUTPUT_DIR to start afresh'.format(
                       os.path.join(self.save_dir, LAST_CHECKPOINT)))
            required = ()
        if not f:
            self.logger.info("No checkpoint found. Initializing model from scratch")
            return {}
        fix = fix or 'pass a .pth written by this recipe or by Scene-Graph-Benchmark'
        refuse_remote(f, what)
        self.logger.info("Loading checkpoint from %s", f)
        ignore = None
        if is_c2_file(f):
            # DetectronCheckpointer._load_file: a .pkl is a Detectron Caffe2 body
            try:
                state, notes = c2_body_state_dict(f, self.cfg.MODEL.BACKBONE.CONV_BODY)
            except WeightsLoadError:
                raise
            except ValueError as e:  # the config has no C2 loader: name the file too
                raise WeightsLoadError('{} {}: {}'.format(what, f, e)) from None
            self.logger.info('%s', notes.format())
            groups = self.cfg.MODEL.RESNETS.NUM_GROUPS
            if notes.groups is not None and notes.groups != groups:
                raise WeightsLoadError(
                    '{} {} is a body with {} groups in its 3x3 convolutions ({}) but '
                    'MODEL.RESNETS.NUM_GROUPS is {}: set MODEL.RESNETS.NUM_GROUPS / '
                    'WIDTH_PER_GROUP of that body (X-101-32x8d: 32 / 8, as SGB\'s '
                    'e2e_relation_detector_X_101_32_8_FPN_1x.yaml), or pass the body of this '
                    'config'.format(what, f, notes.groups, 'a ResNeXt' if notes.groups > 1
                                    else 'a plain ResNet', groups))
            checkpoint, ignore = {'model': state}, _c2_missing_statistics
        else:
            checkpoint = load_weights_file(f, what, fix)
        blob = checkpoint.pop('gluontrain', None)
        extra = self._read_extra(blob, f, what, fix)
        # optimizer and scheduler states are checked before the model is touched: a refusal
        # leaves everything as it was
        if with_optim and 'optimizer' in checkpoint and self.optimizer is not None:
            self._check_optimizer(checkpoint["optimizer"], f, what)
        sched_state = None
        if with_optim and restore_scheduler and 'scheduler' in checkpoint and \
                self.scheduler is not None:
            sched_state = self._scheduler_state(checkpoint['scheduler'], f, what, fix)
        self.last_report = load_state_dict_with_mapping(
            unwrap_model(self.model), checkpoint.pop('model'), load_mapping or {}, source=f,
            what=what, fix=fix, allow_partial=not resume, required=required, ignore=ignore,
            log=self.logger)
        result = {'hooks': extra.get('hooks', {})} if with_optim else {}
        if with_optim:
            if "optimizer" in checkpoint and self.optimizer is not None:
                self.logger.info("Loading optimizer from %s", f)
                self.optimizer.load_state_dict(checkpoint["optimizer"])
            if "scheduler" in checkpoint and self.scheduler is not None:
                if sched_state is not None:
                    self.logger.info("Loading scheduler from %s", f)
                    self.scheduler.load_state_dict(sched_state)
                if update_schedule and 'iteration' in checkpoint:
                    self.scheduler.last_epoch = checkpoint["iteration"]
            elif self.scheduler is not None and resume:
                self.logger.info("%s holds no scheduler state (SGB's relation training saves "
                                 "none): the schedule restarts, as in SGB", f)
            if blob is None and resume:
                self.logger.warning(
                    "%s holds no gluontrain state (written by Scene-Graph-Benchmark?): the RNG "
                    "states and the meters start afresh, so this resume is not bit-identical "
                    "to an uninterrupted run", f)
            if 'rng' in extra:
                set_all_rng_states(extra)
        result.update((k, v) for k, v in checkpoint.items() if k not in ('optimizer', 'scheduler'))
        return result

    @staticmethod
    def _read_extra(blob, path, what, fix):
        if blob is None:
            return {}
        try:
            return core_ckpt.loads_state(blob, path)
        except Exception as exc:  # a torn or foreign blob: one line, never a traceback
            raise WeightsLoadError('{} {}: its gluontrain state cannot be read ({}); {}'.format(
                what, path, ' '.join(str(exc).split())[:200] or type(exc).__name__, fix)) from None

    def _check_optimizer(self, saved, path, what):
        """Refuse (one line) an optimizer state that does not fit this optimizer: SGB's own
        files fit when the model and config are the same (one param group per trainable
        parameter in ``named_parameters()`` order, as here); torch would otherwise load
        another model's momentum buffers by position and fail, or not, at the first step."""
        def refuse(reason):
            raise WeightsLoadError(
                '{} {}: its optimizer state does not fit this model\'s optimizer ({}); resume '
                'with the configuration that wrote it, or keep only its weights: a new '
                'OUTPUT_DIR with MODEL.PRETRAINED_DETECTOR_CKPT (relation) / MODEL.WEIGHT '
                '(detector) {}'.format(what, path, reason, path))
        if not isinstance(saved, dict) or not isinstance(saved.get('param_groups'), list) \
                or not isinstance(saved.get('state'), dict):
            refuse('no "state" and "param_groups"')
        ours = self.optimizer.param_groups
        if len(saved['param_groups']) != len(ours):
            refuse('{} parameter groups in the file, {} here: another model, another '
                   'frozen part or another predictor'.format(len(saved['param_groups']),
                                                             len(ours)))
        params = []
        for i, (theirs, mine) in enumerate(zip(saved['param_groups'], ours)):
            ids = theirs.get('params', []) if isinstance(theirs, dict) else []
            if len(ids) != len(mine['params']):
                refuse('group {} holds {} parameters in the file, {} here'.format(
                    i, len(ids), len(mine['params'])))
            params += list(zip(ids, mine['params']))
        for pid, param in params:
            entry = saved['state'].get(pid, {})
            for name, value in (entry.items() if isinstance(entry, dict) else ()):
                if torch.is_tensor(value) and value.dim() and value.shape != param.shape:
                    refuse('{} {} of parameter {} in the file, the parameter is {} here: the '
                           'parameters are in another order or of other shapes'.format(
                               name, tuple(value.shape), pid, tuple(param.shape)))

    def _scheduler_state(self, saved, path, what, fix):
        """The scheduler part of ``saved`` this scheduler can take: SGB's detector files hold
        torch's ``_LRScheduler`` bookkeeping (``_step_count``, ``verbose`` ...) beside the
        same schedule fields, dropped here; another schedule (``SOLVER.SCHEDULE.TYPE``) or
        another number of param groups is refused in one line."""
        mine = self.scheduler.state_dict()
        lacking = sorted(k for k in mine if k != '_last_lr' and k not in (saved or {}))
        if not isinstance(saved, dict) or lacking:
            raise WeightsLoadError(
                '{} {}: its scheduler state is of another schedule (no {}); resume with the '
                'SOLVER.SCHEDULE.TYPE that wrote it, or set SOLVER.RESTORE_SCHEDULER False to '
                'restart the schedule (SGB\'s behaviour)'.format(
                    what, path, ', '.join(lacking[:4]) if isinstance(saved, dict) else 'dict'))
        base = saved.get('base_lrs')
        if isinstance(base, (list, tuple)) and len(base) != len(self.optimizer.param_groups):
            raise WeightsLoadError(
                '{} {}: its scheduler has {} learning rates, this optimizer {} param groups; '
                '{}'.format(what, path, len(base), len(self.optimizer.param_groups), fix))
        return {k: v for k, v in saved.items() if k in mine}
