"""COCO box AP of the validation, as seamseg's ``seamseg/utils/coco_ap.py``.

``process_prediction`` turns one image's detections (``(y0, x0, y1, x1)`` in network-input
pixels) into COCO result records in the original image (rescaled per axis, clamped to the
image, ``[x, y, w, h]``). ``summarize`` runs pycocotools' ``COCOeval(..., 'bbox')`` and
returns ``stats[0]``, AP@[.50:.95] with 100 detections per image.

Two traps of seamseg's are fixed (docs/faithfulness.md): seamseg evaluates against the
ground truth of the images that produced at least one detection only (an image where the
detector finds nothing drops out instead of counting its misses), and with no detection at
all pycocotools' ``loadRes([])`` raises ``IndexError``. Here the ground truth covers every
validated image and an empty result scores 0; ``reference_img_filter=True`` restores the
first behaviour.
"""
import json

import torch

from ...core.coco_eval import coco_ground_truth, run_coco_eval
from ..distributed import is_distributed

__all__ = ['process_prediction', 'category_map', 'summarize', 'summarize_distributed']


def category_map(dataset):
    """Evaluation category id of each thing class the model predicts (``0 .. thing-1``).

    ISS: the contiguous ISS id ``num_stuff + c`` (what seamseg's ``coco/*.json`` uses);
    COCO: the json's own category id.

    Parameters
    ----------
    dataset : ISSDataset or COCODataset

    Returns
    -------
    list of int
    """
    if dataset.num_stuff == 0 and hasattr(dataset, 'annotation_file'):
        return list(dataset.original_ids)
    return [dataset.num_stuff + c for c in range(dataset.num_thing)]


def process_prediction(bbx_pred, cls_pred, obj_pred, img_size, idx, original_size,
                       categories=None):
    """COCO result records of one image.

    Parameters
    ----------
    bbx_pred : torch.Tensor
        ``(K, 4)`` ``(y0, x0, y1, x1)`` in network-input pixels.
    cls_pred : torch.Tensor
        ``(K,)`` thing index (or, with ``categories=None``, the category id itself, as
        seamseg passes ``cls + num_stuff``).
    obj_pred : torch.Tensor
        ``(K,)`` scores.
    img_size : (int, int)
        Network-input ``(H, W)`` of the image (unpadded).
    idx : int or str
        COCO image id.
    original_size : (int, int)
        Original ``(H, W)``.
    categories : list of int, optional
        :func:`category_map`.

    Returns
    -------
    list of dict
    """
    bbx = bbx_pred.detach().cpu().float().clone().reshape(-1, 4)
    bbx[:, [0, 2]] = (bbx[:, [0, 2]] / img_size[0] * original_size[0]).clamp(
        min=0, max=original_size[0])
    bbx[:, [1, 3]] = (bbx[:, [1, 3]] / img_size[1] * original_size[1]).clamp(
        min=0, max=original_size[1])
    size = bbx[:, 2:] - bbx[:, :2]
    out = []
    for box, hw, cls, score in zip(bbx.tolist(), size.tolist(), cls_pred.tolist(),
                                   obj_pred.tolist()):
        cat = int(cls) if categories is None else int(categories[int(cls)])
        out.append({'image_id': idx, 'category_id': cat, 'score': float(score),
                    'bbox': [box[1], box[0], hw[1], hw[0]]})
    return out


def summarize(predictions, annotations_file, img_list, reference_img_filter=False):
    """AP@[.50:.95] (``COCOeval.stats[0]``) of ``predictions`` on the images ``img_list``.

    Parameters
    ----------
    predictions : list of dict
        COCO result records.
    annotations_file : str
        COCO ground truth json.
    img_list : sequence
        Ids of every validated image (seamseg: only those with a detection; see
        ``reference_img_filter``).
    reference_img_filter : bool
        seamseg's behaviour: keep only the ground truth of images that have a detection.

    Returns
    -------
    float
        0.0 when there is no prediction.
    """
    if reference_img_filter:
        img_list = {p['image_id'] for p in predictions}
    keep = set(img_list)
    with open(annotations_file) as f:
        dataset = json.load(f)
    dataset['images'] = [img for img in dataset['images'] if img['id'] in keep]
    dataset['annotations'] = [a for a in dataset['annotations'] if a['image_id'] in keep]
    if not predictions or not dataset['images']:
        return 0.0
    coco_eval, _ = run_coco_eval(coco_ground_truth(dataset), [dict(p) for p in predictions])
    return float(coco_eval.stats[0])


def summarize_distributed(predictions, annotations_file, img_list, reference_img_filter=False):
    """:func:`summarize` over the records of every process (gathered in memory; seamseg
    writes per-rank files in the log dir). Every rank gets the score.

    Parameters
    ----------
    predictions, annotations_file, img_list, reference_img_filter
        As :func:`summarize`, for this process's share.

    Returns
    -------
    float
    """
    if is_distributed():
        gathered = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(gathered, (predictions, list(img_list)))
        predictions = [p for preds, _ in gathered for p in preds]
        img_list = [i for _, ids in gathered for i in ids]
    return summarize(predictions, annotations_file, img_list, reference_img_filter)
