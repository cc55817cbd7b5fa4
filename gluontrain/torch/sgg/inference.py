"""Scene-Graph-Benchmark's ``engine/inference.py``: predictions over a loader, gathered from
every process, then the VG evaluation.

The evaluation (:func:`evaluate`, SGB's ``do_vg_evaluation``) writes into the output folder,
in SGB's layout and through staged writes (a crash never leaves a torn file):

- ``eval_results.pytorch``: ``{'groundtruths': [BoxList], 'predictions': [BoxList]}``, one
  entry per image in dataset order; ground truth as ``get_groundtruth(i, evaluation=True)``
  (``labels``, ``attributes``, ``relation``, ``relation_tuple``), predictions resized to the
  image's original size with the relation head's fields (``pred_labels``, ``pred_scores``,
  ``rel_pair_idxs``, ``pred_rel_scores``, ``pred_rel_labels``);
- ``result_dict.pytorch`` (relations on): ``{'<mode>_recall': {20: [...], 50: [...], 100:
  [...]}, ...}``, SGB's evaluators' containers.

Differences (docs/faithfulness.md): no CUDA requirement (``torch.cuda`` calls only on CUDA),
the gather is ``torch.distributed.all_gather_object`` (SGB pickles through byte tensors), the
predictions are computed with the global RNGs left as they were (validation in the middle of a
run must not change what training draws next: exact resume), and TEST.BBOX_AUG is refused
(SGB's test-time augmentation is not ported). The cached ``eval_results.pytorch`` of
``TEST.ALLOW_LOAD_FROM_CACHE`` is read with ``torch.load(weights_only=True)`` allowing only
BoxList (SGB unpickles anything): SGB's own files, whose BoxList is
``maskrcnn_benchmark.structures.bounding_box.BoxList``, read as this package's BoxList; a file
of other objects, or of another dataset size, is refused in one line. The pickled class of the
files written here is this package's BoxList (same attributes ``bbox``, ``size``, ``mode``,
``extra_fields``, ``triplet_extra_fields``; SGB's tools read them with gluontrain importable).
"""
import logging
import os
import time

import torch

from ...core.load_report import WeightsLoadError
from ..distributed import get_rank, get_world_size, is_distributed
from ..passes import preserved_rng
from ..weights import read_weights_file
from ..twostage.structures import BoxList

__all__ = ['compute_on_dataset', 'accumulate_predictions', 'inference', 'iou_types_of',
           'load_cached_predictions', 'EVAL_RESULTS', 'RESULT_DICT', 'SGB_BOXLIST']

#: SGB's file names in the output folder (``vg_eval.py``).
EVAL_RESULTS, RESULT_DICT = 'eval_results.pytorch', 'result_dict.pytorch'

#: The class name SGB's pickles give their BoxList.
SGB_BOXLIST = 'maskrcnn_benchmark.structures.bounding_box.BoxList'

_LOG = logging.getLogger('gluontrain.sgg.inference')


def iou_types_of(cfg):
    """SGB's ``iou_types`` (relation_train_net.py:235-243): ``bbox`` plus ``relations`` /
    ``attributes`` when those heads are on."""
    iou_types = ("bbox",)
    if cfg.MODEL.RELATION_ON:
        iou_types = iou_types + ("relations",)
    if cfg.MODEL.ATTRIBUTE_ON:
        iou_types = iou_types + ("attributes",)
    return iou_types


def compute_on_dataset(model, data_loader, device, timer=None):
    """``{image index: BoxList}`` of this process's share of ``data_loader``.

    Parameters
    ----------
    model : torch.nn.Module
        Called as ``model(images, targets)`` in eval mode (relation models need the targets:
        PredCls/SGCls use the ground-truth boxes).
    data_loader : iterable
        Batches ``(images, targets, image_ids)``.
    device : torch.device
    timer : list, optional
        Receives the model's seconds per batch.

    Returns
    -------
    dict
    """
    model.eval()
    results = {}
    cpu = torch.device("cpu")
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
                output = [o.to(cpu) for o in output]
            results.update({int(i): r for i, r in zip(image_ids, output)})
    return results


def accumulate_predictions(predictions_per_process):
    """Merge every process's dict and order it by image index (None on ranks other than 0).

    Parameters
    ----------
    predictions_per_process : dict

    Returns
    -------
    list or None
    """
    if is_distributed():
        gathered = [None] * get_world_size()
        torch.distributed.all_gather_object(gathered, predictions_per_process)
    else:
        gathered = [predictions_per_process]
    if get_rank() != 0:
        return None
    predictions = {}
    for part in gathered:
        predictions.update(part)
    image_ids = sorted(predictions)
    if image_ids and len(image_ids) != image_ids[-1] + 1:
        _LOG.warning("Number of images that were gathered from multiple processes is not a "
                     "contiguous set. Some images might be missing from the evaluation")
    return [predictions[i] for i in image_ids]


def inference(cfg, model, data_loader, dataset_name, iou_types=("bbox",), device="cpu",
              output_folder=None, logger=None, zeroshot_triplet=None):
    """SGB's ``inference``: predictions (or the cached ``eval_results.pytorch`` when
    ``TEST.ALLOW_LOAD_FROM_CACHE``), gathered, then :func:`evaluate`.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    model : torch.nn.Module
    data_loader : DataLoader
        Its ``dataset`` gives the ground truth (``get_groundtruth(i, evaluation=True)``).
    dataset_name : str
    iou_types : tuple of str
    device : str or torch.device
    output_folder : str, optional
        Where the evaluation writes ``eval_results.pytorch`` / ``result_dict.pytorch``.
    logger : logging.Logger, optional
    zeroshot_triplet : str or ndarray, optional
        Zero-shot triplets (file or array) for zR@K; None prints nan there.

    Returns
    -------
    (float, dict)
        SGB's return value (mean R@100 of the mode with relations on, mAP for boxes only;
        -1.0 on ranks other than 0) and the evaluation's result dict (empty off rank 0).
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
        predictions = accumulate_predictions(compute_on_dataset(model, data_loader, device,
                                                                timer))
    total = time.time() - start
    logger.info("Total run time: %.3fs (%.4f s / img per device, on %d devices)", total,
                total * get_world_size() / max(len(dataset), 1), get_world_size())
    logger.info("Model inference time: %.3fs (%.4f s / img per device, on %d devices)",
                sum(timer), sum(timer) * get_world_size() / max(len(dataset), 1),
                get_world_size())
    if predictions is None:
        return -1.0, {}
    return evaluate(cfg, dataset, predictions, output_folder, logger, iou_types,
                    zeroshot_triplet)


def load_cached_predictions(path, num_images=None):
    """The ``predictions`` of an ``eval_results.pytorch`` (ours or SGB's), read safely.

    Parameters
    ----------
    path : str
    num_images : int, optional
        The dataset's size; a file of another size is refused.

    Returns
    -------
    list of BoxList

    Raises
    ------
    FileNotFoundError, WeightsLoadError
        One line: unreadable, objects other than tensors and BoxList (a hostile pickle is
        refused before it runs), not SGB's layout, or another number of images.
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


def evaluate(cfg, dataset, predictions, output_folder, logger, iou_types,
             zeroshot_triplet=None):
    """The VG evaluation (:func:`.evaluation.vg_eval.do_vg_evaluation`) as ``(score,
    result_dict)`` (an empty dict without relations)."""
    from .evaluation.vg_eval import do_vg_evaluation  # pylint: disable=import-outside-toplevel
    score, result = do_vg_evaluation(cfg=cfg, dataset=dataset, predictions=predictions,
                                     output_folder=output_folder, logger=logger,
                                     iou_types=iou_types, zeroshot_triplet=zeroshot_triplet,
                                     return_result_dict=True)
    return float(score), dict(result or {})
