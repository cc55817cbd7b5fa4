"""Per-image boxes with named per-box fields, as maskrcnn-benchmark's ``BoxList``.

Scene-Graph-Benchmark passes one ``BoxList`` per image through data, model and evaluation:
the ground truth carries ``labels``, ``attributes`` and the ``relation`` matrix (a *triplet*
field, ``(N, N)``, indexed on both axes when boxes are selected); proposals carry
``pred_labels``, ``pred_scores``, ``predict_logits``, ``rel_pair_idxs`` and so on. This class
keeps the same method names and the same pixel convention (``+1`` inclusive sides for areas,
widths and horizontal flips) so SGB's code paths read the same here.
"""
import torch

from ..ops import box_area, box_intersection, box_iou

__all__ = ['FLIP_LEFT_RIGHT', 'FLIP_TOP_BOTTOM', 'BoxList', 'boxlist_iou', 'boxlist_union',
           'boxlist_intersection', 'cat_boxlist']

FLIP_LEFT_RIGHT = 0
FLIP_TOP_BOTTOM = 1
# maskrcnn-benchmark's pixel-inclusive convention: a box [x0, x1] is x1 - x0 + 1 wide
_TO_REMOVE = 1


class BoxList:
    """``N`` boxes of one image of size ``(width, height)``, plus per-box fields.

    Parameters
    ----------
    bbox : array-like
        ``(N, 4)`` boxes, ``(x0, y0, x1, y1)`` for ``mode='xyxy'`` or ``(x, y, w, h)``.
    image_size : tuple of int
        ``(width, height)`` of the image the boxes live in (PIL's order).
    mode : {'xyxy', 'xywh'}
    """

    def __init__(self, bbox, image_size, mode='xyxy'):
        device = bbox.device if isinstance(bbox, torch.Tensor) else torch.device('cpu')
        bbox = torch.as_tensor(bbox, dtype=torch.float32, device=device)
        if bbox.dim() != 2 or bbox.shape[-1] != 4:
            raise ValueError('bbox must be (N, 4), got shape {}'.format(tuple(bbox.shape)))
        if mode not in ('xyxy', 'xywh'):
            raise ValueError("mode must be 'xyxy' or 'xywh', got {!r}".format(mode))
        self.bbox = bbox
        self.size = tuple(image_size)
        self.mode = mode
        self.extra_fields = {}
        # fields indexed on both axes by box selections (the relation matrix)
        self.triplet_extra_fields = []

    # -- fields ---------------------------------------------------------------------------
    def add_field(self, field, field_data, is_triplet=False):
        """Attach ``field_data`` under ``field``; triplet fields are ``(N, N, ...)``."""
        self.extra_fields[field] = field_data
        if is_triplet and field not in self.triplet_extra_fields:
            self.triplet_extra_fields.append(field)

    def get_field(self, field):
        """The data stored under ``field`` (``KeyError`` when absent)."""
        return self.extra_fields[field]

    def has_field(self, field):
        """Whether ``field`` is attached."""
        return field in self.extra_fields

    def fields(self):
        """Names of the attached fields, in insertion order."""
        return list(self.extra_fields)

    def _with_fields(self, bbox, size, mode, apply=None, fields=None):
        out = BoxList(bbox, size, mode)
        for k in (self.fields() if fields is None else fields):
            v = self.extra_fields[k]
            if apply is not None:
                v = apply(k, v)
            out.add_field(k, v, is_triplet=k in self.triplet_extra_fields)
        return out

    # -- geometry -------------------------------------------------------------------------
    def _split_into_xyxy(self):
        if self.mode == 'xyxy':
            return self.bbox.split(1, dim=-1)
        x0, y0, w, h = self.bbox.split(1, dim=-1)
        return (x0, y0, x0 + (w - _TO_REMOVE).clamp(min=0),
                y0 + (h - _TO_REMOVE).clamp(min=0))

    def convert(self, mode):
        """The same boxes in ``mode`` (``self`` when already there)."""
        if mode not in ('xyxy', 'xywh'):
            raise ValueError("mode must be 'xyxy' or 'xywh', got {!r}".format(mode))
        if mode == self.mode:
            return self
        x0, y0, x1, y1 = self._split_into_xyxy()
        if mode == 'xyxy':
            bbox = torch.cat((x0, y0, x1, y1), dim=-1)
        else:
            bbox = torch.cat((x0, y0, x1 - x0 + _TO_REMOVE, y1 - y0 + _TO_REMOVE), dim=-1)
        return self._with_fields(bbox, self.size, mode)

    def resize(self, size, *args, **kwargs):
        """A copy scaled to an image of ``size = (width, height)``.

        Tensor fields are kept; non-tensor fields (masks) are resized through their own
        ``resize``.
        """
        ratios = tuple(float(s) / float(s0) for s, s0 in zip(size, self.size))

        def field(k, v):
            return v if isinstance(v, torch.Tensor) else v.resize(size, *args, **kwargs)

        if ratios[0] == ratios[1]:
            return self._with_fields(self.bbox * ratios[0], size, self.mode, field)
        x0, y0, x1, y1 = self._split_into_xyxy()
        rw, rh = ratios
        bbox = torch.cat((x0 * rw, y0 * rh, x1 * rw, y1 * rh), dim=-1)
        return self._with_fields(bbox, size, 'xyxy', field).convert(self.mode)

    def transpose(self, method):
        """Flip left-right (``x -> W - x - 1``, pixel-inclusive) or top-bottom (``y -> H - y``)."""
        if method not in (FLIP_LEFT_RIGHT, FLIP_TOP_BOTTOM):
            raise NotImplementedError('only FLIP_LEFT_RIGHT and FLIP_TOP_BOTTOM are implemented')
        width, height = self.size
        x0, y0, x1, y1 = self._split_into_xyxy()
        if method == FLIP_LEFT_RIGHT:
            bbox = torch.cat((width - x1 - _TO_REMOVE, y0, width - x0 - _TO_REMOVE, y1), dim=-1)
        else:
            # maskrcnn-benchmark's vertical flip has no -1; kept as the reference has it
            bbox = torch.cat((x0, height - y1, x1, height - y0), dim=-1)

        def field(k, v):
            return v if isinstance(v, torch.Tensor) else v.transpose(method)

        return self._with_fields(bbox, self.size, 'xyxy', field).convert(self.mode)

    def clip_to_image(self, remove_empty=True):
        """Clamp the boxes into ``[0, W-1] x [0, H-1]`` in place; drop empty ones if asked."""
        w, h = self.size
        self.bbox[:, 0].clamp_(min=0, max=w - _TO_REMOVE)
        self.bbox[:, 1].clamp_(min=0, max=h - _TO_REMOVE)
        self.bbox[:, 2].clamp_(min=0, max=w - _TO_REMOVE)
        self.bbox[:, 3].clamp_(min=0, max=h - _TO_REMOVE)
        if remove_empty:
            b = self.bbox
            return self[(b[:, 3] > b[:, 1]) & (b[:, 2] > b[:, 0])]
        return self

    def area(self):
        """``(N,)`` areas, pixel-inclusive for ``xyxy``."""
        if self.mode == 'xyxy':
            return box_area(self.bbox, plus_one=True)
        return self.bbox[:, 2] * self.bbox[:, 3]

    # -- tensor-like ----------------------------------------------------------------------
    def to(self, device):
        """A copy on ``device`` (fields with a ``to`` method are moved too)."""
        return self._with_fields(self.bbox.to(device), self.size, self.mode,
                                 lambda k, v: v.to(device) if hasattr(v, 'to') else v)

    def __getitem__(self, item):
        def field(k, v):
            if k in self.triplet_extra_fields:
                return v[item][:, item]
            return v[item]
        return self._with_fields(self.bbox[item], self.size, self.mode, field)

    def __len__(self):
        return self.bbox.shape[0]

    def copy(self):
        """The boxes without their fields."""
        return BoxList(self.bbox, self.size, self.mode)

    def copy_with_fields(self, fields, skip_missing=False):
        """The boxes with only ``fields`` (``KeyError`` for a missing one unless skipped)."""
        if not isinstance(fields, (list, tuple)):
            fields = [fields]
        missing = [f for f in fields if not self.has_field(f)]
        if missing and not skip_missing:
            raise KeyError("field {!r} not found in {}".format(missing[0], self))
        return self._with_fields(self.bbox, self.size, self.mode,
                                 fields=[f for f in fields if self.has_field(f)])

    def __repr__(self):
        return '{}(num_boxes={}, image_width={}, image_height={}, mode={})'.format(
            type(self).__name__, len(self), self.size[0], self.size[1], self.mode)


def _same_image(a, b, what, pairs=False):
    """The ``xyxy`` boxes of two ``BoxList`` of one image (and, with ``pairs``, as many)."""
    if a.size != b.size:
        raise ValueError('{}: boxes of different images, sizes {} and {}'
                         .format(what, a.size, b.size))
    if pairs and len(a) != len(b):
        raise ValueError('{}: {} and {} boxes'.format(what, len(a), len(b)))
    return a.convert('xyxy').bbox, b.convert('xyxy').bbox


def boxlist_iou(boxlist1, boxlist2):
    """Pairwise IoU of two ``BoxList`` of one image, pixel-inclusive (``+1``) as SGB's.

    Returns
    -------
    torch.Tensor
        ``(N, M)`` IoU.
    """
    return box_iou(*_same_image(boxlist1, boxlist2, 'boxlist_iou'), plus_one=True)


def boxlist_intersection(boxlist1, boxlist2):
    """Element-wise intersection boxes of two equally long ``BoxList`` (no fields).

    Disjoint pairs give an all-zero box, as SGB's ``boxlist_intersection``.
    """
    a, b = _same_image(boxlist1, boxlist2, 'boxlist_intersection', pairs=True)
    box = torch.cat((torch.max(a[:, :2], b[:, :2]), torch.min(a[:, 2:], b[:, 2:])), dim=1)
    inter = box_intersection(a[:, None], b[:, None], plus_one=True)[:, 0, 0]
    box[inter == 0] = 0
    return BoxList(box, boxlist1.size, 'xyxy')


def boxlist_union(boxlist1, boxlist2):
    """Element-wise smallest boxes enclosing each pair (the union box of a relation)."""
    a, b = _same_image(boxlist1, boxlist2, 'boxlist_union', pairs=True)
    box = torch.cat((torch.min(a[:, :2], b[:, :2]), torch.max(a[:, 2:], b[:, 2:])), dim=1)
    return BoxList(box, boxlist1.size, 'xyxy')


def cat_boxlist(bboxes):
    """Concatenate ``BoxList`` of one image that carry the same fields.

    Triplet fields are joined block-diagonally (a box of one list has no relation to a box
    of another).
    """
    if not bboxes:
        raise ValueError('cat_boxlist: nothing to concatenate')
    first = bboxes[0]
    for b in bboxes[1:]:
        if b.size != first.size or b.mode != first.mode or set(b.fields()) != set(first.fields()):
            raise ValueError('cat_boxlist: lists differ in image size, mode or fields '
                             '({} vs {})'.format(first, b))
    out = BoxList(torch.cat([b.bbox for b in bboxes], dim=0), first.size, first.mode)
    for k in first.fields():
        values = [b.get_field(k) for b in bboxes]
        if k in first.triplet_extra_fields:
            out.add_field(k, torch.block_diag(*values), is_triplet=True)
        else:
            out.add_field(k, torch.cat(values, dim=0))
    return out
