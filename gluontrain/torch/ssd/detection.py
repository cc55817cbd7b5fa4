"""SSD's test-time detection layer (``layers/functions/detection.py`` of ssd.pytorch).

The reference ``Detect`` is a legacy ``torch.autograd.Function`` that modern PyTorch refuses
to call; here it is a plain ``nn.Module`` with the same constructor arguments (plus
``variance``, which the reference read from the VOC config) and the same output: up to
``top_k`` detections per class, as the reference's no-op final per-image top-k leaves them
(docs/faithfulness.md, "SSD300", "Deliberate differences")."""
import numpy as np
import torch
import torch.nn as nn

from ..ops.nms import batched_ssd_nms
from .box_utils import decode

__all__ = ['Detect', 'detections_in_pixels', 'results_file_values']


class Detect(nn.Module):
    """Decode SSD predictions and run per-class NMS.

    For every image and class ``c >= 1`` (class 0 is background, whatever ``bkg_label`` says,
    as in the reference): keep priors with score ``> conf_thresh``, decode their boxes, run
    :func:`~gluontrain.torch.ops.nms.ssd_nms` (``nms_thresh``, ``top_k`` candidates) and write
    the survivors by descending score. All (image, class) pairs are processed together by
    :func:`~gluontrain.torch.ops.nms.batched_ssd_nms`, equal to the per-class loop.

    Parameters
    ----------
    num_classes : int
        Classes including background.
    bkg_label : int
        Kept for compatibility (unused, as in the reference).
    top_k : int
        Candidates per class for NMS and rows per class of the output (200).
    conf_thresh : float
        Minimum score (strictly greater) of a candidate (0.01).
    nms_thresh : float
        NMS IoU threshold (0.45); must be positive.
    variance : tuple of float, default (0.1, 0.2)
        Decoding variances.

    Raises
    ------
    ValueError
        If ``nms_thresh <= 0``.
    """

    def __init__(self, num_classes, bkg_label, top_k, conf_thresh, nms_thresh,
                 variance=(0.1, 0.2)):
        super().__init__()
        del bkg_label  # unused, as in the reference
        if nms_thresh <= 0:
            raise ValueError('nms_threshold must be non negative.')
        self.num_classes, self.top_k, self.variance = num_classes, top_k, tuple(variance)
        self.nms_thresh, self.conf_thresh = nms_thresh, conf_thresh

    @torch.no_grad()
    def forward(self, loc_data, conf_data, prior_data):
        """Detections of a batch.

        Parameters
        ----------
        loc_data : torch.Tensor
            ``(B, P, 4)`` (or ``(B, P*4)``) predicted offsets.
        conf_data : torch.Tensor
            ``(B, P, C)`` (or ``(B*P, C)``) class **probabilities** (after softmax).
        prior_data : torch.Tensor
            ``(P, 4)`` centre-size priors.

        Returns
        -------
        torch.Tensor
            ``(B, C, top_k, 5)`` rows ``(score, x1, y1, x2, y2)`` by descending score within
            each class, zeros after the last detection; class 0 is all zeros.
        """
        num, num_priors = loc_data.size(0), prior_data.size(0)
        num_classes, top_k = self.num_classes, self.top_k
        output = conf_data.new_zeros(num, num_classes, top_k, 5)
        if num_classes < 2:
            return output
        boxes = decode(loc_data.reshape(num, num_priors, 4), prior_data, self.variance)
        scores = conf_data.reshape(num, num_priors, num_classes).transpose(2, 1)[:, 1:]
        order, keep, cand = batched_ssd_nms(boxes[:, None], scores, scores > self.conf_thresh,
                                            self.nms_thresh, top_k)
        rows = torch.cat([scores.gather(-1, order)[..., None], cand], -1)  # [B, C-1, K, 5]
        # Kept candidates go to consecutive rows (their order is already by score); the
        # others go to a sink row past top_k that is dropped.
        slot = torch.where(keep, keep.long().cumsum(-1) - 1, torch.full_like(order, top_k))
        buf = output.new_zeros(num, num_classes - 1, top_k + 1, 5)
        buf.scatter_(2, slot[..., None].expand(*slot.shape, 5), rows)
        output[:, 1:] = buf[:, :, :top_k]
        return output


def detections_in_pixels(dets, width, height):
    """One image's ``Detect`` output ``[num_classes, top_k, 5]`` as flat arrays.

    Returns
    -------
    (labels, scores, boxes)
        Every row with a positive score; ``labels`` are 0-based foreground classes (``Detect``
        row ``j`` is class ``j - 1``), ``boxes`` [N, 4] x1, y1, x2, y2 scaled from [0, 1] to
        the image's ``width`` and ``height`` (0-based pixels), in float32 as eval.py scales them.
    """
    keep = dets[1:, :, 0] > 0
    labels = np.nonzero(keep)[0]
    rows = np.asarray(dets[1:][keep], np.float32)
    return labels, rows[:, 0], rows[:, 1:] * np.array([width, height, width, height], np.float32)


def results_file_values(scores, boxes):
    """The detections as ssd.pytorch's ``eval.py`` scores them: it writes each to its VOC
    results file as ``'{:.3f}'`` score and ``'{:.1f}'`` 1-based corners (the float32 box + 1)
    and reads the text back, so its ranking and overlaps see the rounded values.

    Parameters
    ----------
    scores : array [N]
    boxes : array [N, 4]
        0-based pixel corners (float32, :func:`detections_in_pixels`).

    Returns
    -------
    (scores, boxes) : float64 arrays as read back from the file
    """
    scores = np.asarray(scores, np.float32).reshape(-1)
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4) + np.float32(1)
    if not len(scores):
        return np.zeros(0), np.zeros((0, 4))
    return (np.char.mod('%.3f', scores).astype(np.float64),
            np.char.mod('%.1f', boxes).astype(np.float64))
