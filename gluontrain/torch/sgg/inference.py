"""Scene-Graph-Benchmark's ``engine/inference.py``: predictions over a loader, gathered from
every process, then the VG evaluation; and the tools' ``run_val`` / ``run_test``
(:func:`test` builds the test loaders, :func:`validation_metrics` serves the loop).

The evaluation writes ``eval_results.pytorch`` and ``result_dict.pytorch`` in SGB's layout
through staged writes, and the ``TEST.ALLOW_LOAD_FROM_CACHE`` cache is read with tensors and
BoxList only (docs/checkpoints.md, "Scene-Graph-Benchmark / maskrcnn-benchmark"). The pickled
class written here is this package's BoxList (SGB's attributes; SGB's tools read it with
gluontrain importable). What differs: docs/faithfulness.md, "Scene-graph training",
"Deliberate differences"."""
import logging
import os
import time

import torch

from ...core.load_report import WeightsLoadError
from ..distributed import TorchComm, get_rank, get_world_size, unwrap_model
from ..passes import preserved_rng
from ..weights import read_weights_file
from ..twostage.structures import BoxList
from .config_values import relation_mode
from .evaluation.vg_eval import do_vg_evaluation, relation_metrics

__all__ = ['compute_on_dataset', 'accumulate_predictions', 'inference', 'iou_types_of',
           'load_cached_predictions', 'run_val', 'run_test', 'test', 'validation_metrics',
           'zeroshot_triplets', 'EVAL_RESULTS', 'RESULT_DICT', 'SGB_BOXLIST']

#: SGB's file names in the output folder (``vg_eval.py``).
EVAL_RESULTS, RESULT_DICT = 'eval_results.pytorch', 'result_dict.pytorch'

#: The class name SGB's pickles give their BoxList.
SGB_BOXLIST = 'maskrcnn_benchmark.structures.bounding_box.BoxList'

_LOG = logging.getLogger('gluontrain.sgg.inference')


def iou_types_of(cfg):
    """SGB's ``iou_types`` (relation_train_net.py:235-243): ``bbox`` plus ``relations`` /
    ``attributes`` when those heads are on."""
    return ("bbox",) + (("relations",) if cfg.MODEL.RELATION_ON else ()) + \
        (("attributes",) if cfg.MODEL.ATTRIBUTE_ON else ())


def compute_on_dataset(model, data_loader, device, timer=None):
    """``{image index: BoxList}`` of this process's share of ``data_loader`` (batches
    ``(images, targets, image_ids)``), ``model(images, targets)`` in eval mode (PredCls/SGCls
    need the targets); ``timer`` receives the model's seconds per batch."""
    model.eval()
    results = {}
    with preserved_rng():
        for images, targets, image_ids in data_loader:
            with torch.no_grad():
                targets = [t.to(device) for t in targets]
                start = time.time()
                output = model(images.to(device), targets)
                if device.type == 'cuda':
                    torch.cuda.synchronize()
                if timer is not None:
                    timer.append(time.time() - start)
                output = [o.to(torch.device('cpu')) for o in output]
            results.update({int(i): r for i, r in zip(image_ids, output)})
    return results


def accumulate_predictions(predictions_per_process):
    """Merge every process's dict, ordered by image index (None on ranks other than 0)."""
    comm = TorchComm()
    gathered = comm.allgather_object(predictions_per_process)
    if comm.rank != 0:
        return None
    predictions = {i: p for part in gathered for i, p in part.items()}
    image_ids = sorted(predictions)
    if image_ids and len(image_ids) != image_ids[-1] + 1:
        _LOG.warning("Number of images that were gathered from multiple processes is not a "
                     "contiguous set. Some images might be missing from the evaluation")
    return [predictions[i] for i in image_ids]


def inference(cfg, model, data_loader, dataset_name, iou_types=("bbox",), device="cpu",
              output_folder=None, logger=None, zeroshot_triplet=None):
    """SGB's ``inference``: predictions (or the cached ``eval_results.pytorch`` when
    ``TEST.ALLOW_LOAD_FROM_CACHE``), gathered, then :func:`.evaluation.vg_eval.do_vg_evaluation`
    writing into ``output_folder``.

    ``data_loader.dataset`` gives the ground truth; ``zeroshot_triplet`` (file or array) the
    zero-shot triplets for zR@K (None prints nan). Returns SGB's score (mean R@100 of the mode,
    mAP for boxes only; -1.0 off rank 0) and the result dict (empty off rank 0).
    """
    if cfg.TEST.BBOX_AUG.ENABLED:
        raise ValueError('TEST.BBOX_AUG.ENABLED: test-time augmentation is not supported by '
                         'this recipe; set it to False')
    logger = logger or _LOG
    device = torch.device(device)
    dataset = data_loader.dataset
    cache = (os.path.join(output_folder, "eval_results.pytorch")
             if output_folder is not None else None)
    from_cache = cfg.TEST.ALLOW_LOAD_FROM_CACHE and cache is not None and os.path.exists(cache)
    logger.info("Start evaluation on %s dataset(%d images).", dataset_name, len(dataset))
    start, timer = time.time(), []
    if from_cache:
        predictions = load_cached_predictions(cache, len(dataset))
        logger.info("Loaded the predictions of %s (TEST.ALLOW_LOAD_FROM_CACHE)", cache)
    else:
        predictions = accumulate_predictions(compute_on_dataset(model, data_loader, device, timer))
    for what, seconds in (('Total run', time.time() - start), ('Model inference', sum(timer))):
        logger.info("%s time: %.3fs (%.4f s / img per device, on %d devices)", what, seconds,
                    seconds * get_world_size() / max(len(dataset), 1), get_world_size())
    if predictions is None:
        return -1.0, {}
    score, result = do_vg_evaluation(cfg=cfg, dataset=dataset, predictions=predictions,
                                     output_folder=output_folder, logger=logger,
                                     iou_types=iou_types, zeroshot_triplet=zeroshot_triplet,
                                     return_result_dict=True)
    return float(score), dict(result or {})


def load_cached_predictions(path, num_images=None):
    """The ``predictions`` (list of BoxList) of an ``eval_results.pytorch``, ours or SGB's.

    Raises ``FileNotFoundError`` or ``WeightsLoadError`` in one line: unreadable, objects other
    than tensors and BoxList (refused before any runs), not SGB's layout, or another number of
    images than ``num_images``.
    """
    what = 'TEST.ALLOW_LOAD_FROM_CACHE: cached predictions'
    fix = ('delete it to predict again, or set TEST.ALLOW_LOAD_FROM_CACHE False')
    with torch.serialization.safe_globals([BoxList, (BoxList, SGB_BOXLIST)]):
        data = read_weights_file(path, what, fix)
    predictions = data.get('predictions') if isinstance(data, dict) else None
    if not isinstance(predictions, list) or not all(isinstance(p, BoxList)
                                                    for p in predictions):
        raise WeightsLoadError('{} {} is not SGB\'s eval_results layout ({{"groundtruths": '
                               '[BoxList], "predictions": [BoxList]}}); {}'.format(
                                   what, path, fix))
    if num_images is not None and len(predictions) != num_images:
        raise WeightsLoadError('{} {} holds {} images, the dataset {}; {}'.format(
            what, path, len(predictions), num_images, fix))
    for p in predictions:   # maskrcnn-benchmark's own BoxList has no triplet fields
        p.__dict__.setdefault('triplet_extra_fields', [])
    return predictions


def _mean_over_ranks(score):
    """relation_train_net.py:264-268: gather each rank's result, mean of those >= 0."""
    if get_world_size() == 1:
        return float(score)
    valid = [v for v in TorchComm().allgather_object(float(score)) if v >= 0]
    return float(sum(valid) / len(valid)) if valid else -1.0


def run_val(cfg, model, val_data_loaders, distributed=False, logger=None, zeroshot=None):
    """SGB's ``run_val``: evaluate every ``DATASETS.VAL`` loader; ``(score, result dict)``, the
    score (mean R@100 of the mode; box mAP for the detector) the same on every rank, the dict
    rank 0's of the last dataset. ``zeroshot``: per dataset, the zero-shot triplets."""
    results = _run_all(cfg, model, cfg.DATASETS.VAL, val_data_loaders, logger, zeroshot,
                       test_folders=False)
    score, result = results[-1] if results else (-1.0, {})
    return _mean_over_ranks(score), result


def run_test(cfg, model, test_data_loaders, distributed=False, logger=None, zeroshot=None):
    """SGB's ``run_test``: evaluate every ``DATASETS.TEST`` loader, writing into
    ``OUTPUT_DIR/inference/<name>/`` (rank 0); one ``(score, result_dict)`` per dataset."""
    return _run_all(cfg, model, cfg.DATASETS.TEST, test_data_loaders, logger, zeroshot,
                    test_folders=True)


def _run_all(cfg, model, names, loaders, logger, zeroshot, test_folders):
    """:func:`inference` on every ``(name, loader)``; the test writes its files into
    ``OUTPUT_DIR/inference/<name>/``, the validation none."""
    model = unwrap_model(model)
    out = []
    for name, loader, zs in zip(names, loaders, zeroshot or [None] * len(loaders)):
        folder = None
        if test_folders and cfg.OUTPUT_DIR:
            folder = os.path.join(cfg.OUTPUT_DIR, "inference", name)
            if get_rank() == 0:
                os.makedirs(folder, exist_ok=True)
        out.append(inference(cfg, model, loader, dataset_name=name,
                             iou_types=iou_types_of(cfg), device=cfg.MODEL.DEVICE,
                             output_folder=folder, logger=logger, zeroshot_triplet=zs))
    return out


#: the metrics a validation reports before its score
_REPORTED = ['R@20', 'R@50', 'R@100', 'ngR@50', 'mR@50', 'zR@50']


def validation_metrics(cfg, net, val_data, zeroshot=None, logger=None):
    """SGB's ``run_val`` on ``val_data``: ``(names, values)``, SGB's main metrics of the
    evaluation (the mode's R@20/50/100, ngR@50, mR@50, zR@50; per-image lists averaged as SGB
    prints them; none without a result) and SGB's validation score (``val_score``: mean R@100
    of the mode, or box mAP) last."""
    score, result = run_val(cfg, net, [val_data], zeroshot=zeroshot, logger=logger)
    names = list(_REPORTED) if result else []
    metrics = relation_metrics(result, relation_mode(cfg)) if result else {}
    return names + ['val_score'], [metrics[name] for name in names] + [score]


def zeroshot_triplets(cfg, train_dataset, eval_dataset):
    """Zero-shot triplets of ``eval_dataset`` for zR@K: ``TEST.RELATION.ZERO_SHOT_FILE``
    (computed and written there when missing), else computed from the training split
    (SGB ships a file for VG150's test split). None without relations."""
    if not cfg.MODEL.RELATION_ON or train_dataset is None:
        return None
    from .evaluation import zeroshot  # pylint: disable=import-outside-toplevel
    base = getattr(train_dataset, 'datasets', [train_dataset])[0]
    if cfg.TEST.RELATION.ZERO_SHOT_FILE:
        return zeroshot.load_or_compute_zeroshot_triplets(cfg.TEST.RELATION.ZERO_SHOT_FILE,
                                                          base, eval_dataset)
    return zeroshot.compute_zeroshot_triplets(base, eval_dataset)


def test(cfg, net, train_dataset=None, data_dir=None, logger=None):
    """SGB's ``run_test`` on ``DATASETS.TEST`` (loaders built here): ``[(score,
    result_dict)]`` per test dataset; ``train_dataset`` gives the zero-shot triplets."""
    # pylint: disable-next=import-outside-toplevel
    from .data.build import build_dataset, make_loader
    from .data.transforms import build_transforms  # pylint: disable=import-outside-toplevel
    datasets = build_dataset(cfg, cfg.DATASETS.TEST, build_transforms(cfg, False),
                             is_train=False, data_dir=data_dir)
    loaders = [make_loader(cfg, ds, False) for ds in datasets]
    return run_test(cfg, net, loaders, logger=logger,
                    zeroshot=[zeroshot_triplets(cfg, train_dataset, ds) for ds in datasets])
