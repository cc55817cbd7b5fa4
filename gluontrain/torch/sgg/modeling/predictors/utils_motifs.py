"""Helpers shared by the relation predictors (SGB's ``utils_motifs.py``).

Word vectors (and the embeddings they start), the 9-d box code, one-hot PredCls logits, the
left-to-right packing of objects for the context LSTMs, and the plumbing every predictor shares
(input checks, pair features). Pixel convention is maskrcnn-benchmark's (``+1`` inclusive sides). Pair geometry,
per-class NMS and initialisations live in :mod:`.utils_relation`.

Word vectors are read from a local ``GLOVE_DIR`` only (``glove.6B.{dim}d.txt``, or SGB's cached
``.pt``); when absent the vectors are random, with a one-line warning. Nothing is downloaded.
"""
import logging
import os

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .....core.checkpoint import atomic_save_file
from .utils_relation import get_box_info

__all__ = ['obj_edge_vectors', 'glove_embeddings', 'load_word_vectors', 'encode_box_info',
           'to_onehot', 'get_dropout_mask', 'sort_rois', 'pair_features', 'check_inputs']

logger = logging.getLogger(__name__)
# word-vector files already warned about (one warning per file and process, not per layer)
_WARNED = set()
# the last word-vector file read: {stem: ((ext, mtime) of its files, result)}
_LOADED = {}


# ------------------------------------------------------------------------------ word vectors
def load_word_vectors(root, wv_type='glove.6B', dim=300):
    """GloVe vectors from ``root/{wv_type}.{dim}d.pt`` (SGB's cache) or ``.txt``.

    A ``.txt`` read writes SGB's ``.pt`` cache beside it (staged, skipped when the folder is
    read-only), and every result is kept for the process, so the three embedding layers of a
    predictor parse the 400k-line file once.

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
    hit = _LOADED.get(os.path.abspath(fname))
    if hit is not None and hit[0] == _signature(fname):
        return hit[1]
    if os.path.isfile(fname + '.pt'):
        result = _load_pt(fname + '.pt')
    elif os.path.isfile(fname + '.txt'):
        result = _load_txt(fname + '.txt')
    else:
        return None
    _LOADED.clear()   # one vocabulary at a time: GloVe files are large
    _LOADED[os.path.abspath(fname)] = (_signature(fname), result)
    return result


def _signature(fname):
    return tuple((ext, os.path.getmtime(fname + ext)) for ext in ('.pt', '.txt')
                 if os.path.isfile(fname + ext))


def _load_pt(path):
    # SGB's cache is (dict, tensor, int): plain containers, loadable without pickle code
    wv_dict, wv_arr, wv_size = torch.load(path, map_location='cpu', weights_only=True)
    return wv_dict, wv_arr, wv_size


def _load_txt(path):
    tokens, rows, size = [], [], None
    with open(path, 'rb') as f:
        for lineno, line in enumerate(f, 1):
            entries = line.strip().split(b' ')
            if len(entries) < 2:
                continue
            word, values = entries[0], entries[1:]
            if size is None:
                size = len(values)
            elif len(values) != size:
                raise ValueError('{} line {}: {} values where the first line has {}; '
                                 'the word-vector file is corrupt'.format(
                                     path, lineno, len(values), size))
            try:
                word = word.decode('utf-8')
            except UnicodeDecodeError:
                continue  # SGB skips non-UTF8 tokens too
            tokens.append(word)
            rows.append([float(v) for v in values])
    result = ({w: i for i, w in enumerate(tokens)},
              torch.tensor(rows, dtype=torch.float32).view(-1, size or 0), size)
    try:
        atomic_save_file(path[:-len('.txt')] + '.pt', lambda tmp: torch.save(result, tmp))
    except OSError as exc:   # a read-only GLOVE_DIR only loses the cache
        logger.debug('word-vector cache not written: %s', exc)
    return result


def obj_edge_vectors(names, wv_dir, wv_dim=300):
    """Embedding rows for class names: GloVe when found, ``N(0, 1)`` otherwise (as SGB).

    A name missing from the vocabulary falls back to its longest word (``'tennis racket'``
    -> ``'racket'``), then stays random. When the GloVe file itself is absent every row is
    random and a single warning line says so (SGB downloads 800 MB here; we never do).

    Parameters
    ----------
    names : list of str
    wv_dir : str
        ``cfg.GLOVE_DIR``.
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
    loaded = load_word_vectors(wv_dir, 'glove.6B', wv_dim)   # SGB's only vocabulary
    path = os.path.join(wv_dir, 'glove.6B.{}d.txt'.format(wv_dim))
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


def glove_embeddings(names, wv_dir, wv_dim, copies=1):
    """``copies`` ``nn.Embedding(len(names), wv_dim)`` layers started from the same
    :func:`obj_edge_vectors` rows (drawn first, then the layers created: SGB's random order)."""
    vecs = obj_edge_vectors(names, wv_dir, wv_dim)
    layers = [nn.Embedding(len(names), wv_dim) for _ in range(copies)]
    with torch.no_grad():
        for layer in layers:
            layer.weight.copy_(vecs)
    return layers


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
        x1, y1, x2, y2, x, y, w, h = get_box_info(p.bbox, need_norm=False).split(1, dim=-1)
        infos.append(torch.cat([w / wid, h / hei, x / wid, y / hei, x1 / wid, y1 / hei,
                                x2 / wid, y2 / hei, w * h / (wid * hei)], dim=-1).view(-1, 9))
    return torch.cat(infos, dim=0)


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
def sort_rois(proposals, mode='leftright', obj_logits=None):
    """Object order for the context LSTMs: by score (high first) within images, packed
    time-major.

    Images keep their order by size (the offset ``2 * (2 * N_i * n_img + i)`` dominates scores
    in ``[0, 1]``), as SGB / neural-motifs.

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
        ``(perm, inv_perm, ls_transposed)``: ``rows[perm]`` is the packed data,
        ``packed[inv_perm]`` goes back, ``ls_transposed`` the batch sizes (long tensor).
    """
    boxes = torch.cat([p.bbox for p in proposals], dim=0)
    if mode == 'leftright':
        c_x = 0.5 * (boxes[:, 0] + boxes[:, 2])
        scores = c_x / (c_x.max() + 1)
    elif mode == 'size':
        sizes = (boxes[:, 2] - boxes[:, 0] + 1.0) * (boxes[:, 3] - boxes[:, 1] + 1.0)
        scores = sizes / (sizes.max() + 1)
    elif mode == 'confidence':
        if obj_logits is None:
            raise ValueError("sort mode 'confidence' needs obj_logits")
        scores = F.softmax(obj_logits, 1)[:, 1:].max(1)[0]
    else:
        raise ValueError("sort mode must be 'leftright', 'confidence' or 'size', got {!r}"
                         .format(mode))
    num_rois = [len(b) for b in proposals]
    num_im = len(num_rois)
    ordered = torch.cat([s + 2.0 * float(n * 2 * num_im + i) for i, (s, n) in
                         enumerate(zip(scores.split(num_rois, dim=0), num_rois))], dim=0)
    _, perm = torch.sort(ordered, 0, descending=True)
    # time-major packing: step t takes row t of every image with more than t objects
    lengths = sorted(num_rois, reverse=True)
    starts = np.cumsum([0] + lengths)
    ls_transposed = [sum(n > t for n in lengths) for t in range(lengths[0])]
    inds = np.concatenate([starts[:k] + t for t, k in enumerate(ls_transposed)], 0)
    perm = perm[torch.as_tensor(inds, dtype=torch.long, device=scores.device)]
    _, inv_perm = torch.sort(perm)
    return perm, inv_perm, torch.as_tensor(ls_transposed, dtype=torch.long)


# ------------------------------------------------------------------------ predictor plumbing
def pair_features(head_rep, tail_rep, obj_preds, rel_pair_idxs, num_objs, difference=False):
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
    difference : bool
        ``head - tail`` (``D`` wide) instead of the concatenation (the causal predictor on
        VTransE features).

    Returns
    -------
    tuple of torch.Tensor
        ``(prod_rep (sum R_i, 2D or D), pair_pred (sum R_i, 2))``.
    """
    prod_reps, pair_preds = [], []
    for pair_idx, head, tail, pred in zip(rel_pair_idxs, head_rep.split(num_objs, dim=0),
                                          tail_rep.split(num_objs, dim=0),
                                          obj_preds.split(num_objs, dim=0)):
        pair_idx = pair_idx.long()
        sub, obj = head[pair_idx[:, 0]], tail[pair_idx[:, 1]]
        prod_reps.append(sub - obj if difference else torch.cat((sub, obj), dim=-1))
        pair_preds.append(torch.stack((pred[pair_idx[:, 0]], pred[pair_idx[:, 1]]), dim=1))
    return torch.cat(prod_reps, dim=0), torch.cat(pair_preds, dim=0)


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
