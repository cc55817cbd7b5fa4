"""Helpers shared by the relation predictors (SGB's ``utils_motifs.py`` / ``utils_relation.py``).

Word vectors, box encodings, the left-to-right packing of objects for the context LSTMs, the
per-class NMS that decodes object labels in SGDet, and SGB's layer initialisations. Pixel
convention is maskrcnn-benchmark's (``+1`` inclusive sides) throughout.

Word vectors are read from a local ``GLOVE_DIR`` only (``glove.6B.{dim}d.txt``, or SGB's cached
``.pt``); when absent the vectors are random, with a one-line warning. Nothing is downloaded.
"""
import logging
import os

import numpy as np
import torch
from torch.nn import functional as F

from ....ops import box_iou

__all__ = ['cat', 'obj_edge_vectors', 'load_word_vectors', 'encode_box_info', 'to_onehot',
           'get_dropout_mask', 'center_x', 'sort_by_score', 'sort_rois',
           'transpose_packed_sequence_inds', 'nms_overlaps', 'obj_prediction_nms',
           'layer_init', 'get_box_info', 'get_box_pair_info', 'make_fc', 'relation_mode',
           'class_names', 'pair_features', 'check_inputs']

logger = logging.getLogger(__name__)
# word-vector files already warned about (one warning per file and process, not per layer)
_WARNED = set()


def cat(tensors, dim=0):
    """``torch.cat`` that returns a single tensor unchanged (maskrcnn-benchmark's ``cat``).

    Parameters
    ----------
    tensors : list or tuple of torch.Tensor
    dim : int

    Returns
    -------
    torch.Tensor
    """
    if not isinstance(tensors, (list, tuple)):
        raise TypeError('cat expects a list or tuple of tensors, got {}'.format(type(tensors)))
    if len(tensors) == 1:
        return tensors[0]
    return torch.cat(tensors, dim)


# ------------------------------------------------------------------------------ word vectors
def load_word_vectors(root, wv_type='glove.6B', dim=300):
    """GloVe vectors from ``root/{wv_type}.{dim}d.pt`` (SGB's cache) or ``.txt``.

    Parameters
    ----------
    root : str
        Folder (``cfg.GLOVE_DIR``).
    wv_type : str
        File stem, ``'glove.6B'`` as SGB.
    dim : int or str
        Vector size (``200`` -> ``glove.6B.200d``).

    Returns
    -------
    tuple or None
        ``(word -> row dict, (V, dim) float tensor, dim)``, or ``None`` when neither file
        exists (the caller falls back to random vectors; SGB would download instead).

    Raises
    ------
    ValueError
        A ``.txt`` line whose vector size differs from the first line's (names the file
        and line).
    """
    if isinstance(dim, int):
        dim = '{}d'.format(dim)
    fname = os.path.join(root, '{}.{}'.format(wv_type, dim))
    if os.path.isfile(fname + '.pt'):
        # SGB's cache is (dict, tensor, int): plain containers, loadable without pickle code
        wv_dict, wv_arr, wv_size = torch.load(fname + '.pt', map_location='cpu',
                                              weights_only=True)
        return wv_dict, wv_arr, wv_size
    if not os.path.isfile(fname + '.txt'):
        return None
    tokens, rows, size = [], [], None
    with open(fname + '.txt', 'rb') as f:
        for lineno, line in enumerate(f, 1):
            entries = line.strip().split(b' ')
            if len(entries) < 2:
                continue
            word, values = entries[0], entries[1:]
            if size is None:
                size = len(values)
            elif len(values) != size:
                raise ValueError('{}.txt line {}: {} values where the first line has {}; '
                                 'the word-vector file is corrupt'.format(
                                     fname, lineno, len(values), size))
            try:
                word = word.decode('utf-8')
            except UnicodeDecodeError:
                continue  # SGB skips non-UTF8 tokens too
            tokens.append(word)
            rows.append([float(v) for v in values])
    wv_arr = torch.tensor(rows, dtype=torch.float32).view(-1, size or 0)
    return {w: i for i, w in enumerate(tokens)}, wv_arr, size


def obj_edge_vectors(names, wv_dir, wv_type='glove.6B', wv_dim=300):
    """Embedding rows for class names: GloVe when found, ``N(0, 1)`` otherwise (as SGB).

    A name missing from the vocabulary falls back to its longest word (``'tennis racket'``
    -> ``'racket'``), then stays random. When the GloVe file itself is absent every row is
    random and a single warning line says so (SGB downloads 800 MB here; we never do).

    Parameters
    ----------
    names : list of str
    wv_dir : str
        ``cfg.GLOVE_DIR``.
    wv_type : str
    wv_dim : int
        ``cfg.MODEL.ROI_RELATION_HEAD.EMBED_DIM``.

    Returns
    -------
    torch.Tensor
        ``(len(names), wv_dim)`` float32.

    Raises
    ------
    ValueError
        The file's vectors are not ``wv_dim`` long.
    """
    vectors = torch.empty(len(names), wv_dim).normal_(0, 1)
    loaded = load_word_vectors(wv_dir, wv_type, wv_dim)
    path = os.path.join(wv_dir, '{}.{}d.txt'.format(wv_type, wv_dim))
    if loaded is None:
        if path not in _WARNED:
            _WARNED.add(path)
            logger.warning('GloVe file %s not found: word embeddings start random '
                           '(set GLOVE_DIR to a folder holding glove.6B.%dd.txt)', path, wv_dim)
        return vectors
    wv_dict, wv_arr, wv_size = loaded
    if wv_size != wv_dim:
        raise ValueError('{}: vectors have {} values, EMBED_DIM is {}'.format(path, wv_size,
                                                                              wv_dim))
    fallbacks, failed = [], []
    for i, token in enumerate(names):
        idx = wv_dict.get(token)
        if idx is None:
            longest = sorted(token.split(' '), key=len, reverse=True)[0]
            idx = wv_dict.get(longest)
            (fallbacks if idx is not None else failed).append(token)
        if idx is not None:
            vectors[i] = wv_arr[idx]
    if fallbacks or failed:
        logger.info('word vectors: longest-word fallback for %s; random for %s',
                    fallbacks, failed)
    return vectors


# ----------------------------------------------------------------------------- box encodings
def encode_box_info(proposals):
    """SGB's 9-d box code, per image normalised by its size.

    ``(w/W, h/H, cx/W, cy/H, x1/W, y1/H, x2/W, y2/H, w*h/(W*H))`` with ``w = x2 - x1 + 1``
    and ``cx = x1 + w / 2`` (SGB's docstring lists the centre first; its code, followed here,
    puts the size first).

    Parameters
    ----------
    proposals : list of BoxList
        ``xyxy`` boxes.

    Returns
    -------
    torch.Tensor
        ``(sum N_i, 9)``.
    """
    infos = []
    for p in proposals:
        if p.mode != 'xyxy':
            raise ValueError("encode_box_info needs 'xyxy' boxes, got {!r}".format(p.mode))
        wid, hei = p.size
        if wid * hei == 0:
            raise ValueError('encode_box_info: image size {} has zero area'.format(p.size))
        boxes = p.bbox
        wh = boxes[:, 2:] - boxes[:, :2] + 1.0
        xy = boxes[:, :2] + 0.5 * wh
        w, h = wh.split([1, 1], dim=-1)
        x, y = xy.split([1, 1], dim=-1)
        x1, y1, x2, y2 = boxes.split([1, 1, 1, 1], dim=-1)
        infos.append(torch.cat([w / wid, h / hei, x / wid, y / hei, x1 / wid, y1 / hei,
                                x2 / wid, y2 / hei, w * h / (wid * hei)], dim=-1).view(-1, 9))
    return torch.cat(infos, dim=0)


def get_box_info(boxes, need_norm=True, proposal=None):
    """``(x1, y1, x2, y2, cx, cy, w, h)``, divided by ``max(W, H, 100)`` when ``need_norm``.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(N, 4)``.
    need_norm : bool
    proposal : BoxList, optional
        Gives the image size when ``need_norm``.

    Returns
    -------
    torch.Tensor
        ``(N, 8)``.
    """
    wh = boxes[:, 2:] - boxes[:, :2] + 1.0
    info = torch.cat((boxes, boxes[:, :2] + 0.5 * wh, wh), 1)
    if need_norm:
        info = info / float(max(max(proposal.size[0], proposal.size[1]), 100))
    return info


def get_box_pair_info(box1, box2):
    """32-d pair code: both boxes' infos, then union and intersection infos (unnormalised).

    Parameters
    ----------
    box1, box2 : torch.Tensor
        ``(R, 8)`` from :func:`get_box_info`.

    Returns
    -------
    torch.Tensor
        ``(R, 32)``; the intersection part is zero for disjoint pairs.
    """
    union = torch.stack([torch.min(box1[:, 0], box2[:, 0]), torch.min(box1[:, 1], box2[:, 1]),
                         torch.max(box1[:, 2], box2[:, 2]), torch.max(box1[:, 3], box2[:, 3])],
                        1)
    inter = torch.stack([torch.max(box1[:, 0], box2[:, 0]), torch.max(box1[:, 1], box2[:, 1]),
                         torch.min(box1[:, 2], box2[:, 2]), torch.min(box1[:, 3], box2[:, 3])],
                        1)
    inter_info = get_box_info(inter, need_norm=False)
    disjoint = (inter[:, 2] < inter[:, 0]) | (inter[:, 3] < inter[:, 1])
    inter_info = inter_info.masked_fill(disjoint[:, None], 0.0)
    return torch.cat((box1, box2, get_box_info(union, need_norm=False), inter_info), 1)


def to_onehot(vec, num_classes, fill=1000):
    """``(N, C)`` float rows of ``-fill`` with ``fill`` at ``vec[i]`` (SGB's PredCls logits).

    Parameters
    ----------
    vec : torch.Tensor
        ``(N,)`` integer labels.
    num_classes : int
    fill : float

    Returns
    -------
    torch.Tensor
    """
    out = torch.full((vec.size(0), num_classes), -float(fill), device=vec.device)
    out[torch.arange(vec.size(0), device=vec.device), vec.long()] = float(fill)
    return out


def get_dropout_mask(dropout_probability, tensor_shape, device):
    """Inverted-dropout mask drawn once per sequence (the decoder reuses it at every step).

    Parameters
    ----------
    dropout_probability : float
    tensor_shape : torch.Size
    device : torch.device

    Returns
    -------
    torch.Tensor
        Entries ``0`` or ``1 / (1 - p)``.
    """
    keep = torch.rand(tensor_shape) > dropout_probability
    return keep.float().to(device).div(1.0 - dropout_probability)


# ---------------------------------------------------------------------- ordering for the LSTMs
def center_x(proposals):
    """Box x-centres of all images, concatenated.

    Parameters
    ----------
    proposals : list of BoxList

    Returns
    -------
    torch.Tensor
        ``(sum N_i,)``.
    """
    boxes = cat([p.bbox for p in proposals], dim=0)
    return (0.5 * (boxes[:, 0] + boxes[:, 2])).view(-1)


def transpose_packed_sequence_inds(lengths):
    """Row order turning image-major rows into a time-major ``PackedSequence``.

    Parameters
    ----------
    lengths : list of int
        Sequence lengths, descending.

    Returns
    -------
    tuple
        ``(indices (sum lengths,) array, batch sizes per time step list)``.
    """
    new_inds, new_lens = [], []
    starts = np.cumsum([0] + list(lengths))
    pointer = len(lengths) - 1
    for t in range(lengths[0]):
        while pointer > 0 and lengths[pointer] <= t:
            pointer -= 1
        new_inds.append(starts[:pointer + 1] + t)
        new_lens.append(pointer + 1)
    return np.concatenate(new_inds, 0), new_lens


def sort_by_score(proposals, scores):
    """Permutation sorting objects by ``scores`` (high first) within images, packed time-major.

    Images keep their order by size (the offset ``2 * (2 * N_i * n_img + i)`` dominates scores
    in ``[0, 1]``), as SGB / neural-motifs.

    Parameters
    ----------
    proposals : list of BoxList
    scores : torch.Tensor
        ``(sum N_i,)`` in ``[0, 1]``.

    Returns
    -------
    tuple
        ``(perm, inv_perm, ls_transposed)``: ``rows[perm]`` is the packed data,
        ``packed[inv_perm]`` goes back, ``ls_transposed`` the batch sizes (long tensor).
    """
    num_rois = [len(b) for b in proposals]
    num_im = len(num_rois)
    parts = scores.split(num_rois, dim=0)
    ordered = cat([s + 2.0 * float(n * 2 * num_im + i)
                   for i, (s, n) in enumerate(zip(parts, num_rois))], dim=0)
    _, perm = torch.sort(ordered, 0, descending=True)
    inds, ls_transposed = transpose_packed_sequence_inds(sorted(num_rois, reverse=True))
    perm = perm[torch.as_tensor(inds, dtype=torch.long, device=scores.device)]
    _, inv_perm = torch.sort(perm)
    return perm, inv_perm, torch.as_tensor(ls_transposed, dtype=torch.long)


def sort_rois(proposals, mode='leftright', obj_logits=None):
    """Object order for the context LSTMs.

    Parameters
    ----------
    proposals : list of BoxList
    mode : {'leftright', 'confidence', 'size'}
        ``'leftright'`` (x-centre) is SGB's only order; ``'confidence'`` (highest foreground
        probability of ``obj_logits``) and ``'size'`` (area) are neural-motifs' other orders.
    obj_logits : torch.Tensor, optional
        ``(sum N_i, C)``; required for ``'confidence'``.

    Returns
    -------
    tuple
        As :func:`sort_by_score`.
    """
    if mode == 'leftright':
        c_x = center_x(proposals)
        scores = c_x / (c_x.max() + 1)
    elif mode == 'size':
        boxes = cat([p.bbox for p in proposals], dim=0)
        sizes = (boxes[:, 2] - boxes[:, 0] + 1.0) * (boxes[:, 3] - boxes[:, 1] + 1.0)
        scores = sizes / (sizes.max() + 1)
    elif mode == 'confidence':
        if obj_logits is None:
            raise ValueError("sort mode 'confidence' needs obj_logits")
        scores = F.softmax(obj_logits, 1)[:, 1:].max(1)[0]
    else:
        raise ValueError("sort mode must be 'leftright', 'confidence' or 'size', got {!r}"
                         .format(mode))
    return sort_by_score(proposals, scores)


# ------------------------------------------------------------------------------ per-class NMS
def nms_overlaps(boxes):
    """Per-class IoU (``+1`` convention) between every pair of objects.

    Parameters
    ----------
    boxes : torch.Tensor
        ``(N, C, 4)`` one box per object and class.

    Returns
    -------
    torch.Tensor
        ``(N, N, C)``.
    """
    if boxes.dim() != 3:
        raise ValueError('nms_overlaps expects (N, C, 4) boxes, got {}'.format(
            tuple(boxes.shape)))
    per_class = boxes.transpose(0, 1)                      # (C, N, 4)
    return box_iou(per_class, per_class, plus_one=True).permute(1, 2, 0)


def obj_prediction_nms(boxes_per_cls, pred_logits, nms_thresh=0.3, bg_value=0.0):
    """Greedy label assignment with per-class NMS (SGB's SGDet object decoding).

    Repeatedly take the highest (object, class) probability, give the object that class,
    zero the class for objects overlapping it by ``>= nms_thresh`` and retire the object.

    Parameters
    ----------
    boxes_per_cls : torch.Tensor
        ``(N, C, 4)``.
    pred_logits : torch.Tensor
        ``(N, C)``.
    nms_thresh : float
        ``cfg.TEST.RELATION.LATER_NMS_PREDICTION_THRES``.
    bg_value : float
        Probability written into the background column before the search: ``0.0`` in SGB's
        MOTIFS decoder and ``obj_prediction_nms`` (an object whose classes were all
        suppressed can then get label 0), ``-1.0`` in its Transformer (it gets class 1).

    Returns
    -------
    torch.Tensor
        ``(N,)`` int64 labels.
    """
    num_obj = pred_logits.shape[0]
    if boxes_per_cls.shape[0] != num_obj:
        raise ValueError('obj_prediction_nms: {} boxes for {} logits'.format(
            boxes_per_cls.shape[0], num_obj))
    is_overlap = (nms_overlaps(boxes_per_cls) >= nms_thresh).cpu().numpy()
    prob = F.softmax(pred_logits.detach(), 1).cpu().numpy()
    prob[:, 0] = bg_value
    labels = np.zeros(num_obj, dtype=np.int64)
    for _ in range(num_obj):
        box_ind, cls_ind = np.unravel_index(prob.argmax(), prob.shape)
        labels[box_ind] = cls_ind
        prob[is_overlap[box_ind, :, cls_ind], cls_ind] = 0.0
        prob[box_ind] = -1.0  # retired
    return torch.as_tensor(labels, device=pred_logits.device)


# ---------------------------------------------------------------------------- initialisations
def layer_init(layer, init_para=0.1, normal=False, xavier=True):
    """SGB's ``layer_init``: ``N(0, init_para)`` when ``normal`` else Xavier-normal; bias 0.

    Parameters
    ----------
    layer : torch.nn.Linear
    init_para : float
        Standard deviation for ``normal``.
    normal : bool
    xavier : bool
        Ignored, as in SGB (``normal=False`` always means Xavier).
    """
    with torch.no_grad():
        if normal:
            torch.nn.init.normal_(layer.weight, mean=0, std=init_para)
        else:
            torch.nn.init.xavier_normal_(layer.weight, gain=1.0)
        torch.nn.init.constant_(layer.bias, 0)


def make_fc(dim_in, hidden_dim):
    """maskrcnn-benchmark's ``make_fc``: Linear with Caffe2's XavierFill (kaiming-uniform a=1).

    Parameters
    ----------
    dim_in, hidden_dim : int

    Returns
    -------
    torch.nn.Linear
    """
    fc = torch.nn.Linear(dim_in, hidden_dim)
    torch.nn.init.kaiming_uniform_(fc.weight, a=1)
    torch.nn.init.constant_(fc.bias, 0)
    return fc


# ------------------------------------------------------------------------ predictor plumbing
def relation_mode(cfg):
    """``'predcls'``, ``'sgcls'`` or ``'sgdet'`` from ``USE_GT_BOX`` / ``USE_GT_OBJECT_LABEL``.

    Parameters
    ----------
    cfg : yacs.config.CfgNode

    Returns
    -------
    str
    """
    head = cfg.MODEL.ROI_RELATION_HEAD
    if head.USE_GT_BOX:
        return 'predcls' if head.USE_GT_OBJECT_LABEL else 'sgcls'
    return 'sgdet'


def class_names(cfg, statistics):
    """``(obj_classes, rel_classes)`` from the statistics, checked against the config sizes.

    Parameters
    ----------
    cfg : yacs.config.CfgNode
    statistics : dict
        SGB's statistics dict.

    Returns
    -------
    tuple of list

    Raises
    ------
    ValueError
        ``MODEL.ROI_BOX_HEAD.NUM_CLASSES`` / ``MODEL.ROI_RELATION_HEAD.NUM_CLASSES`` differ
        from the dataset's class counts (SGB asserts).
    """
    obj_classes, rel_classes = list(statistics['obj_classes']), list(statistics['rel_classes'])
    for key, value, names in (('MODEL.ROI_BOX_HEAD.NUM_CLASSES',
                               cfg.MODEL.ROI_BOX_HEAD.NUM_CLASSES, obj_classes),
                              ('MODEL.ROI_RELATION_HEAD.NUM_CLASSES',
                               cfg.MODEL.ROI_RELATION_HEAD.NUM_CLASSES, rel_classes)):
        if value != len(names):
            raise ValueError('{} is {} but the dataset has {} classes (background included); '
                             'set {} {}'.format(key, value, len(names), key, len(names)))
    return obj_classes, rel_classes


def pair_features(head_rep, tail_rep, obj_preds, rel_pair_idxs, num_objs):
    """Concatenate subject-head and object-tail features per relation pair, with class pairs.

    Parameters
    ----------
    head_rep, tail_rep : torch.Tensor
        ``(sum N_i, D)``.
    obj_preds : torch.Tensor
        ``(sum N_i,)`` object labels.
    rel_pair_idxs : list of torch.Tensor
        ``(R_i, 2)`` per image, indices local to the image.
    num_objs : list of int

    Returns
    -------
    tuple of torch.Tensor
        ``(prod_rep (sum R_i, 2D), pair_pred (sum R_i, 2))``.
    """
    prod_reps, pair_preds = [], []
    for pair_idx, head, tail, pred in zip(rel_pair_idxs, head_rep.split(num_objs, dim=0),
                                          tail_rep.split(num_objs, dim=0),
                                          obj_preds.split(num_objs, dim=0)):
        pair_idx = pair_idx.long()
        prod_reps.append(torch.cat((head[pair_idx[:, 0]], tail[pair_idx[:, 1]]), dim=-1))
        pair_preds.append(torch.stack((pred[pair_idx[:, 0]], pred[pair_idx[:, 1]]), dim=1))
    return cat(prod_reps, dim=0), cat(pair_preds, dim=0)


def check_inputs(proposals, rel_pair_idxs):
    """Raise a clear error when images and pair lists do not line up.

    Parameters
    ----------
    proposals : list of BoxList
    rel_pair_idxs : list of torch.Tensor
    """
    if len(proposals) != len(rel_pair_idxs):
        raise ValueError('{} images of proposals but {} rel_pair_idxs'.format(
            len(proposals), len(rel_pair_idxs)))
