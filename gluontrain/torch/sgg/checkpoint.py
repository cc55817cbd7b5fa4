"""Scene-Graph-Benchmark's ``Checkpointer`` (``maskrcnn_benchmark/utils/checkpoint.py:13-149``).

Same files and semantics: ``{OUTPUT_DIR}/{name}.pth`` (``model_{iter:07d}``, ``model_final``),
a ``last_checkpoint`` text file naming the last one written, and ``load`` that prefers
``last_checkpoint`` over the file it is given (so a rerun of the same command resumes).
A ``.pth`` is a ``torch.save`` dict with SGB's keys ``model``, ``optimizer``, ``scheduler``
and the caller's extras (``iteration``), readable by SGB's own loader.

Differences (docs/faithfulness.md, "Scene-Graph-Benchmark"):

- relation_train_net builds the checkpointer with ``custom_scheduler=True``, so SGB never
  saves the scheduler: a resumed run restarts the warmup, forgets the plateau decays and
  shifts the multi-step milestones. Here the scheduler is saved and restored
  (``SOLVER.RESTORE_SCHEDULER``; False keeps SGB's loss).
- SGB saves no RNG state; here ``gluontrain`` holds Python's, NumPy's and torch's generator
  states and the hooks' state (meters, curves, pass position), pickled plain data read back
  with the core's restricted unpickler, so a resumed run is bit-identical.
- Files are staged and renamed (``core.checkpoint``): a crash never leaves a torn
  ``.pth`` or ``last_checkpoint``. ``last_checkpoint`` holds the file name; a relative name is
  looked up in the output folder (SGB writes ``OUTPUT_DIR/name.pth`` and resolves it from the
  working directory, which breaks once the folder moves; its absolute paths are still read).
- Files are read with ``torch.load(weights_only=True)`` (SGB unpickles anything).
"""
import io
import logging
import os
import pickle

import torch

from ...core import checkpoint as core_ckpt
from ..checkpoint import get_torch_rng_states, set_torch_rng_states
from ..distributed import unwrap_model

__all__ = ['Checkpointer', 'load_weights_file', 'LAST_CHECKPOINT', 'DETECTOR_LOAD_MAPPING']

#: The text file naming the last checkpoint (SGB's name).
LAST_CHECKPOINT = 'last_checkpoint'

#: relation_train_net.py:62-63: relation-head extractors initialised from the detector's box
#: feature extractor (SGB's module names; the model's own names are mapped by the recipe).
DETECTOR_LOAD_MAPPING = {
    "roi_heads.relation.box_feature_extractor": "roi_heads.box.feature_extractor",
    "roi_heads.relation.union_feature_extractor.feature_extractor":
        "roi_heads.box.feature_extractor"}


def _logger(logger):
    return logger if logger is not None else logging.getLogger(__name__)


def load_weights_file(path, what='checkpoint'):
    """Read a ``.pth`` as SGB's ``DetectronCheckpointer._load_file``: a dict with ``model``,
    or a bare state dict (wrapped as ``{'model': ...}``).

    Parameters
    ----------
    path : str
    what : str
        How the error names the file (e.g. ``'MODEL.PRETRAINED_DETECTOR_CKPT'``).

    Returns
    -------
    dict

    Raises
    ------
    FileNotFoundError, ValueError
        A missing file, or one that is not a torch weights file.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError('{} {} does not exist'.format(what, path))
    try:
        loaded = torch.load(path, map_location=torch.device('cpu'), weights_only=True)
    except Exception as exc:  # pickle / zip errors of a foreign or torn file
        raise ValueError('{} {} is not a PyTorch weights file ({}): pass a .pth written by '
                         'torch.save or by this recipe'.format(
                             what, path, ' '.join(str(exc).split())[:200])) from None
    if not isinstance(loaded, dict):
        raise ValueError('{} {} holds a {}, not a state dict'.format(
            what, path, type(loaded).__name__))
    if 'model' not in loaded:
        loaded = dict(model=loaded)
    return loaded


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
        self.cfg = cfg
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.save_dir, self.save_to_disk = save_dir, save_to_disk
        self.logger = _logger(logger)

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
        extra = {'rng': core_ckpt.get_rng_states(), 'torch_rng': get_torch_rng_states(),
                 'hooks': hooks_state or {}}
        data['gluontrain'] = pickle.dumps(extra, protocol=pickle.HIGHEST_PROTOCOL)
        save_file = os.path.join(self.save_dir, "{}.pth".format(name))
        self.logger.info("Saving checkpoint to %s", save_file)
        os.makedirs(self.save_dir, exist_ok=True)
        core_ckpt.atomic_save_file(save_file, lambda tmp: torch.save(data, tmp))
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
        return bool(self.save_dir) and os.path.exists(
            os.path.join(self.save_dir, LAST_CHECKPOINT))

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
             restore_scheduler=True, restore_rng=True, what='checkpoint'):
        """SGB's ``Checkpointer.load``: ``last_checkpoint`` wins over ``f``.

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
        restore_rng : bool
        what : str
            How errors name ``f``.

        Returns
        -------
        dict
            The remaining content (``iteration`` ...) and ``hooks`` (the hooks' state), or
            ``{}`` when there is nothing to load.
        """
        if self.has_checkpoint():
            f, what = self.get_checkpoint_file(), os.path.join(self.save_dir, LAST_CHECKPOINT)
        if not f:
            self.logger.info("No checkpoint found. Initializing model from scratch")
            return {}
        self.logger.info("Loading checkpoint from %s", f)
        checkpoint = load_weights_file(f, what)
        self._load_model(checkpoint.pop('model'), load_mapping or {}, f)
        blob = checkpoint.pop('gluontrain', None)
        extra = (core_ckpt._restricted_load(io.BytesIO(blob), f)  # pylint: disable=protected-access
                 if blob is not None else {})
        result = {}
        if with_optim:
            if "optimizer" in checkpoint and self.optimizer is not None:
                self.logger.info("Loading optimizer from %s", f)
                self.optimizer.load_state_dict(checkpoint.pop("optimizer"))
            if "scheduler" in checkpoint and self.scheduler is not None:
                saved = checkpoint.pop("scheduler")
                if restore_scheduler:
                    self.logger.info("Loading scheduler from %s", f)
                    self.scheduler.load_state_dict(saved)
                if update_schedule:
                    self.scheduler.last_epoch = checkpoint["iteration"]
            if restore_rng and 'rng' in extra:
                core_ckpt.set_rng_states(extra['rng'])
                set_torch_rng_states(extra['torch_rng'])
            result['hooks'] = extra.get('hooks', {})
        checkpoint.pop('optimizer', None)
        checkpoint.pop('scheduler', None)
        result.update(checkpoint)
        return result

    def _load_model(self, state_dict, load_mapping, path):
        # pylint: disable-next=import-outside-toplevel
        from .modeling.load_mapping import load_state_dict_with_mapping
        try:
            load_state_dict_with_mapping(unwrap_model(self.model), state_dict, load_mapping)
        except ValueError as exc:
            raise ValueError('{}: {}'.format(path, exc)) from None
        except RuntimeError as exc:
            lines = [' '.join(line.split()) for line in str(exc).splitlines() if line.strip()]
            raise ValueError('{} does not fit this model: {}; pass weights of the same '
                             'configuration (MODEL.*, the dataset\'s class counts)'.format(
                                 path, '; '.join(lines[:2])[:400])) from None

