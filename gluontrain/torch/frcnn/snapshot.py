"""seamseg's snapshots (seamseg/utils/snapshot.py, train_detection.py).

File ``{log_dir}/model_last.pth.tar`` written every epoch, copied to ``model_best.pth.tar``
when validation improves::

    {'config': <the .ini text>,
     'state_dict': {'body', 'rpn_head', 'roi_head', 'optimizer', 'loss_meter',
                    'obj_loss_meter', 'bbx_loss_meter', 'roi_cls_loss_meter',
                    'roi_bbx_loss_meter'},
     'training_meta': {'epoch', 'last_score', 'best_score', 'global_step'}}

Written through a temporary file and a rename (seamseg writes in place), read with
``torch.load(weights_only=True)``; what loads and what each load reports:
docs/checkpoints.md, "seamseg"."""
from gluontrain.core.load_report import WeightsLoadError, check, guess_origin

from ..checkpoint import save_file
from ..weights import (apply_report, compare_state_dict, load_state_dict_reported,
                       read_weights_file)
from .config import config_to_string
from .log import get_logger
from .model import LOSS_NAMES

__all__ = ['LAST', 'BEST', 'MODULES', 'METERS', 'save_snapshot', 'load_snapshot',
           'resume_from_snapshot', 'pre_train_from_snapshots', 'MissingModuleError',
           'SNAPSHOT_FIX']

LAST = 'model_last.pth.tar'
BEST = 'model_best.pth.tar'
MODULES = ('body', 'rpn_head', 'roi_head')
METERS = ('loss',) + LOSS_NAMES
#: The end of every error about a snapshot file.
SNAPSHOT_FIX = ('pass a {} or {} written by this recipe or by seamseg with the same [body], '
                '[fpn], [rpn], [roi] settings and classes'.format(LAST, BEST))


class MissingModuleError(WeightsLoadError, KeyError):
    """A snapshot without one of the modules to load: seamseg's ``KeyError``, and a
    one-line ``WeightsLoadError`` for the command line."""

    __str__ = WeightsLoadError.__str__


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
    save_file(file, data)


def load_snapshot(file, what='--resume'):
    """Read a snapshot (tensors, numbers and strings only).

    Parameters
    ----------
    file : str
    what : str, default '--resume'
        The argument the file came from, to start error messages.

    Raises
    ------
    FileNotFoundError
        Missing file.
    WeightsLoadError
        Empty, truncated, hostile or other file that is not a seamseg snapshot (the message
        says what it looks like).
    """
    data = read_weights_file(file, what, SNAPSHOT_FIX)
    if not isinstance(data, dict) or not isinstance(data.get('state_dict'), dict):
        origin = guess_origin(data) if isinstance(data, dict) else None
        raise WeightsLoadError(
            '{} {} is not a seamseg snapshot{}: expected a dict with "state_dict" (and '
            '"training_meta", "config"); {}'.format(
                what, file, ' (it looks like {})'.format(origin) if origin else '',
                SNAPSHOT_FIX))
    return data


def resume_from_snapshot(model, snapshot, modules=MODULES, what='--resume', logger=None):
    """Load every module of ``modules`` from ``snapshot``; returns the snapshot dict.

    Every module is checked before any is loaded, and must load completely (unexpected
    tensors aside; ``num_batches_tracked``, which InPlaceABN snapshots may lack, is not
    expected). seamseg loads resumed modules as leniently as pre-trained ones, silently
    skipping what does not fit; a resumed run here refuses that (one line naming the file,
    module and first keys). Each module's report is logged.

    Returns
    -------
    dict
        The snapshot; ``data['load_reports']`` maps each module to its
        :class:`~gluontrain.core.load_report.LoadReport`.

    Raises
    ------
    MissingModuleError
        The snapshot lacks one of ``modules`` (seamseg's ``KeyError``, also a
        ``WeightsLoadError``).
    WeightsLoadError
        A module does not load completely.
    """
    data = load_snapshot(snapshot, what)
    for name in modules:
        if name not in data['state_dict']:
            raise MissingModuleError(
                "{} {}: the given snapshot does not contain a state_dict for module '{}' (it "
                "has {}); {}".format(what, snapshot, name,
                                     ', '.join(sorted(data['state_dict'])) or 'none',
                                     SNAPSHOT_FIX))
    planned = []
    for name in modules:
        module = getattr(model, name)
        report, state = compare_state_dict(module, data['state_dict'][name],
                                           '{} [{}]'.format(snapshot, name), what, SNAPSHOT_FIX)
        check(report, what, SNAPSHOT_FIX)
        planned.append((name, module, state, report))
    logger = logger or get_logger()
    for name, module, state, report in planned:
        apply_report(module, state, report)
        logger.info('%s', report.format())
    data['load_reports'] = {name: report for name, _, _, report in planned}
    return data


def pre_train_from_snapshots(model, snapshots, modules=MODULES, logger=None):
    """seamseg's ``--pre_train``: each entry ``path`` or ``module:path``, later ones
    overwrite earlier ones.

    seamseg's ``_load_pretraining_dict`` is lenient: tensors whose shape differs from the
    module's are skipped, missing ones keep the module's values
    (``load_state_dict(strict=False)``). seamseg drops them silently; here each module's
    report (loaded N of M, missing / unexpected keys grouped, wrong shapes named,
    :func:`gluontrain.torch.weights.load_state_dict_reported`) is logged to ``logger``
    (default: the recipe's, ``training.log``), and a load that fills nothing is refused.

    Returns
    -------
    list of (str, LoadReport)
        ``(module, report)`` in load order.

    Raises
    ------
    ValueError
        ``module`` is not one of ``modules``.
    WeightsLoadError
        A file holds none of ``modules``, or fills no tensor of a module.
    """
    reports = []
    for entry in snapshots:
        head, sep, tail = entry.partition(':')
        # 'C:' drive letters and paths with a colon further on are not module prefixes
        if sep and len(head) > 1 and '/' not in head and '\\' not in head:
            module_name, path = head, tail
        else:
            module_name, path = None, entry
        if module_name is not None and module_name not in modules:
            raise ValueError('Unrecognized network module {!r} in --pre_train {}; use one of {}'
                             .format(module_name, entry, ', '.join(modules)))
        data = load_snapshot(path, '--pre_train')
        names = [module_name] if module_name else [n for n in modules if n in data['state_dict']]
        if not names or names[0] not in data['state_dict']:
            raise WeightsLoadError('--pre_train {}: the snapshot holds no state_dict for {} (it '
                                   'has {}); {}'.format(
                                       entry, module_name or ', '.join(modules),
                                       ', '.join(sorted(data['state_dict'])) or 'none',
                                       SNAPSHOT_FIX))
        for name in names:
            reports.append((name, load_state_dict_reported(
                getattr(model, name), data['state_dict'][name], '{} [{}]'.format(path, name),
                '--pre_train', SNAPSHOT_FIX, allow_partial=True,
                logger=logger or get_logger())))
    return reports

