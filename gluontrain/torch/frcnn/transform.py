"""seamseg's ``ISSTransform`` (seamseg/data/transform.py), boxes from instance masks
(``extract_boxes``, src/bbx/bbx.cpp) and ``iss_collate_fn`` (seamseg/data/misc.py).

Training transform, in seamseg's order and with its random draws (Python's ``random``):
flip left-right with probability 0.5 (``random.random() < 0.5``); target shortest side
``int(uniform(shortest_size * s0, shortest_size * s1))`` (or ``choice`` among more than two
scales); ``scale = target / min(W, H)``, reduced to ``longest_max_size / max(W, H)`` when
``int(max(W, H) * scale)`` exceeds it; output ``(int(W * scale), int(H * scale))``, image
bilinear, masks nearest; ``/255`` then ``(x - rgb_mean) / rgb_std``; instance ids compacted
to the ones present (0 always kept); boxes ``(y0, x0, y1, x1)`` = ``(i_min, j_min, i_max + 1,
j_max + 1)`` of each instance, ``-1`` rows for ids absent from the mask.

COCO data has boxes and no masks: :meth:`ISSTransform.apply_boxes` applies the same draws to
the boxes (flip ``x -> W - x``, then scale each axis by ``out / in``).
"""
import random

import numpy as np
import torch
from PIL import Image

__all__ = ['ISSTransform', 'extract_boxes', 'PackedSequence', 'iss_collate_fn', 'to_tensor']


def to_tensor(img):
    """A PIL RGB image as a float ``(3, H, W)`` tensor in [0, 1] (torchvision's
    ``to_tensor``)."""
    arr = np.asarray(img, dtype=np.float32) / 255.
    return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


def extract_boxes(mask, num_instances):
    """Bounding box of every instance id ``< num_instances`` in an instance mask.

    Parameters
    ----------
    mask : torch.Tensor or numpy.ndarray
        ``(H, W)`` or ``(C, H, W)`` integer ids (all channels are searched).
    num_instances : int

    Returns
    -------
    torch.Tensor
        ``(num_instances, 4)`` float32 ``(i_min, j_min, i_max + 1, j_max + 1)``; ``-1`` rows
        for ids that do not occur.
    """
    m = mask.numpy() if isinstance(mask, torch.Tensor) else np.asarray(mask)
    if m.ndim == 2:
        m = m[None]
    out = np.full((num_instances, 4), -1, dtype=np.float32)
    for i in np.unique(m):
        if 0 <= i < num_instances:
            hit = m == i
            rows = np.nonzero(hit.any(axis=(0, 2)))[0]
            cols = np.nonzero(hit.any(axis=(0, 1)))[0]
            out[i] = (rows[0], cols[0], rows[-1] + 1, cols[-1] + 1)
    return torch.from_numpy(out)


class ISSTransform:
    """seamseg's training/validation transform.

    Parameters
    ----------
    shortest_size : int
    longest_max_size : int
    rgb_mean, rgb_std : sequence of float or None
    random_flip : bool
    random_scale : sequence of float or None
        Two values: continuous range of the multiplier; more: discrete choices.
    """

    def __init__(self, shortest_size, longest_max_size, rgb_mean=None, rgb_std=None,
                 random_flip=False, random_scale=None):
        self.shortest_size = shortest_size
        self.longest_max_size = longest_max_size
        self.rgb_mean, self.rgb_std = rgb_mean, rgb_std
        self.random_flip, self.random_scale = random_flip, random_scale

    def adjusted_scale(self, in_width, in_height, target_size):
        """``target / shortest side``, capped so the longest side stays within
        ``longest_max_size``."""
        scale = target_size / min(in_width, in_height)
        if int(max(in_width, in_height) * scale) > self.longest_max_size:
            scale = self.longest_max_size / max(in_width, in_height)
        return scale

    def random_target_size(self):
        """seamseg's ``_random_target_size`` (one ``random`` draw)."""
        if len(self.random_scale) == 2:
            target = random.uniform(self.shortest_size * self.random_scale[0],
                                    self.shortest_size * self.random_scale[1])
        else:
            target = random.choice([self.shortest_size * s for s in self.random_scale])
        return int(target)

    def output_size(self, in_width, in_height, target_size=None):
        """``(W', H')`` for an input size (``target_size`` default ``shortest_size``)."""
        scale = self.adjusted_scale(in_width, in_height,
                                    self.shortest_size if target_size is None else target_size)
        return int(in_width * scale), int(in_height * scale)

    def _geometry(self):
        flip = self.random_flip and random.random() < 0.5
        target = self.random_target_size() if self.random_scale is not None \
            else self.shortest_size
        return flip, target

    def _normalize(self, img):
        if self.rgb_mean is not None:
            img.sub_(img.new_tensor(self.rgb_mean).view(-1, 1, 1))
        if self.rgb_std is not None:
            img.div_(img.new_tensor(self.rgb_std).view(-1, 1, 1))
        return img

    def __call__(self, img, msk, cat, iscrowd):
        """Transform an image with its instance masks (seamseg's ``__call__``).

        Parameters
        ----------
        img : PIL.Image.Image
            RGB.
        msk : list of PIL.Image.Image
            Instance-id masks.
        cat, iscrowd : sequence of int
            Per instance id.

        Returns
        -------
        dict
            ``img (3, H', W')``, ``msk (C, H', W')`` long, ``cat`` long, ``iscrowd`` uint8,
            ``bbx (K, 4)`` float.
        """
        flip, target = self._geometry()
        if flip:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
            msk = [m.transpose(Image.FLIP_LEFT_RIGHT) for m in msk]
        out_size = self.output_size(img.size[0], img.size[1], target)
        img = img.resize(out_size, resample=Image.BILINEAR)
        msk = [m.resize(out_size, resample=Image.NEAREST) for m in msk]
        cat = np.array(cat, dtype=np.int32)
        iscrowd = np.array(iscrowd, dtype=np.uint8)
        img = self._normalize(to_tensor(img))
        msk = np.stack([np.array(m, dtype=np.int32) for m in msk], axis=0)
        ids = np.unique(msk)
        if ids.max() >= len(cat):
            raise ValueError('the mask holds instance id {} but cat lists only {} instances'
                             .format(int(ids.max()), len(cat)))
        if 0 not in ids:
            ids = np.concatenate(([0], ids)).astype(ids.dtype)
        compact = np.zeros(ids.max() + 1, dtype=np.int32)
        compact[ids] = np.arange(ids.size, dtype=np.int32)
        msk, cat, iscrowd = compact[msk], cat[ids], iscrowd[ids]
        msk = torch.from_numpy(msk.astype(np.int64))
        cat = torch.from_numpy(cat.astype(np.int64))
        return dict(img=img, msk=msk, cat=cat, iscrowd=torch.from_numpy(iscrowd),
                    bbx=extract_boxes(msk, cat.numel()))

    def apply_boxes(self, img, bbx, cat, iscrowd):
        """The same random draws and geometry applied to boxes (COCO data, no masks).

        Parameters
        ----------
        img : PIL.Image.Image
        bbx : array-like
            ``(K, 4)`` ``(y0, x0, y1, x1)`` in input pixels.
        cat, iscrowd : sequence of int

        Returns
        -------
        dict
            ``img``, ``cat`` long, ``iscrowd`` uint8, ``bbx (K, 4)`` float.
        """
        flip, target = self._geometry()
        width, height = img.size
        bbx = torch.as_tensor(np.asarray(bbx, dtype=np.float32).reshape(-1, 4)).clone()
        if flip:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
            bbx[:, [1, 3]] = width - bbx[:, [3, 1]]
        out_w, out_h = self.output_size(width, height, target)
        img = img.resize((out_w, out_h), resample=Image.BILINEAR)
        bbx[:, [0, 2]] *= out_h / height
        bbx[:, [1, 3]] *= out_w / width
        return dict(img=self._normalize(to_tensor(img)),
                    cat=torch.as_tensor(np.asarray(cat, dtype=np.int64)),
                    iscrowd=torch.as_tensor(np.asarray(iscrowd, dtype=np.uint8)), bbx=bbx)


class PackedSequence:
    """A list of variable-size tensors (seamseg's ``PackedSequence``), ``None`` allowed.

    Parameters
    ----------
    tensors : list of (torch.Tensor or None)
    """

    def __init__(self, tensors):
        self._tensors = list(tensors)
        if any(t is not None and not isinstance(t, torch.Tensor) for t in self._tensors):
            raise TypeError('All args must be tensors')
        if len({t.dtype for t in self._tensors if t is not None}) > 1:
            raise TypeError('All tensors must have the same type')

    def __len__(self):
        return len(self._tensors)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return PackedSequence(self._tensors[item])
        return self._tensors[item]

    def __iter__(self):
        return iter(self._tensors)

    @property
    def all_none(self):
        """True when every entry is ``None``."""
        return all(t is None for t in self._tensors)

    def to(self, device, non_blocking=False):
        """Move every tensor (returns a new sequence)."""
        return PackedSequence([t.to(device, non_blocking=non_blocking) if t is not None else None
                               for t in self._tensors])

    @property
    def contiguous(self):
        """``(cat(tensors, 0), index of the source entry of each row)``; ``(None, None)``
        when all are ``None``."""
        if self.all_none:
            return None, None
        if len({tuple(t.shape[1:]) for t in self._tensors if t is not None}) > 1:
            raise ValueError('The tensors in the sequence are not compatible for contiguous '
                             'view')
        parts = [(t, torch.full((t.size(0),), i, dtype=torch.long, device=t.device))
                 for i, t in enumerate(self._tensors) if t is not None]
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def iss_collate_fn(items):
    """seamseg's collate: a dict of lists, tensor entries as :class:`PackedSequence`.

    Parameters
    ----------
    items : list of dict

    Returns
    -------
    dict
    """
    out = {}
    if items:
        for key in items[0]:
            values = [item[key] for item in items]
            out[key] = PackedSequence(values) if isinstance(items[0][key], torch.Tensor) \
                else values
    return out
