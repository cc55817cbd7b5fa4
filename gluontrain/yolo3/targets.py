"""YOLOv3 training targets for a whole image at once, equal to GluonCV's element for element.

:class:`FastYOLOV3TargetGenerator` does the work of GluonCV's per-box Python loop
(``YOLOV3PrefetchTargetGenerator``, about a third of the train transform's cost) with a
handful of numpy array operations and returns the same five arrays, bit for bit; the float
arithmetic that identity takes and how it is tested: docs/faithfulness.md, "Fast train
transform, targets and VOC metric" ("Targets")."""
import numpy as np

__all__ = ['FastYOLOV3TargetGenerator', 'zero_center_iou']


def zero_center_iou(anchors, widths, heights):
    """IoU of zero-centred anchors and boxes, in float32 as ``mx.nd.contrib.box_iou``.

    Parameters
    ----------
    anchors : ndarray [A, 2] float32
        Anchor (width, height).
    widths, heights : ndarray [M] float32
        Box sizes.

    Returns
    -------
    ndarray [M, A] float32
    """
    f32 = np.float32
    half = f32(0.5)
    # corners exactly as BBoxCenterToCorner (anchors) and the -0.5*w .. 0.5*w gt shift
    ahw, ahh = anchors[:, 0] * half, anchors[:, 1] * half
    axmin, aymin, axmax, aymax = f32(0) - ahw, f32(0) - ahh, f32(0) + ahw, f32(0) + ahh
    gxmin, gymin = f32(-0.5) * widths, f32(-0.5) * heights
    gxmax, gymax = half * widths, half * heights
    left = np.maximum(axmin[None, :], gxmin[:, None])
    right = np.minimum(axmax[None, :], gxmax[:, None])
    top = np.maximum(aymin[None, :], gymin[:, None])
    bot = np.minimum(aymax[None, :], gymax[:, None])
    iw, ih = right - left, bot - top
    inter = np.where((iw < 0) | (ih < 0), f32(0), iw * ih)

    def area(xmin, ymin, xmax, ymax):
        w, h = xmax - xmin, ymax - ymin
        return np.where((w < 0) | (h < 0), f32(0), w * h)

    union = area(axmin, aymin, axmax, aymax)[None, :] + area(gxmin, gymin, gxmax, gymax)[:, None]
    with np.errstate(divide='ignore', invalid='ignore'):
        iou = inter / (union - inter)
    return np.where(inter <= 0, f32(0), iou).astype(np.float32)


class FastYOLOV3TargetGenerator:
    """Vectorised ``YOLOV3PrefetchTargetGenerator`` for one image.

    Parameters
    ----------
    num_class : int
        Number of foreground classes.
    anchors : list of array-like
        Per output layer, the anchors the network returns (any shape holding ``A_l`` pairs).
    offsets : list of array-like
        Per output layer, the offsets the network returns (``H_l * W_l`` pairs).
    feat_maps : list of array-like or list of (int, int)
        Per output layer, the feature map (``shape[2:4]`` is ``(H_l, W_l)``) or its size.
    width, height : int
        Network input size (the reference reads it from the zeros image it ran the net on).
    """

    def __init__(self, num_class, anchors, offsets, feat_maps, width, height):
        if not len(anchors) == len(offsets) == len(feat_maps):
            raise ValueError('anchors, offsets and feat_maps need one entry per output layer, '
                             'got {}, {}, {}'.format(len(anchors), len(offsets), len(feat_maps)))
        self.num_class = int(num_class)
        self.width, self.height = int(width), int(height)
        per_layer = [np.asarray(_np(a), dtype=np.float32).reshape(-1, 2) for a in anchors]
        self.anchors = np.concatenate(per_layer, axis=0)
        self._layer_anchors = np.array([len(a) for a in per_layer], dtype=np.int64)
        cells = [int(np.asarray(_np(o)).size // 2) for o in offsets]
        sizes = [tuple(int(s) for s in (f.shape[2:4] if hasattr(f, 'shape') else f))
                 for f in feat_maps]
        self._layer_hw = np.array(sizes, dtype=np.int64)
        self._layer_cells = np.array(cells, dtype=np.int64)
        num_anchors = np.cumsum(self._layer_anchors)
        self._anchor_layer = np.searchsorted(num_anchors, np.arange(len(self.anchors)),
                                             side='right')
        anchor_start = num_anchors - self._layer_anchors
        self._anchor_in_layer = np.arange(len(self.anchors)) - anchor_start[self._anchor_layer]
        # each layer's (cell, anchor) block in the concatenated output, and where it starts
        block = self._layer_cells * self._layer_anchors
        self._out_start = np.cumsum(block) - block
        self.num_outputs = int(np.sum(block))

    def __call__(self, gt_boxes, gt_ids, gt_mixratio=None):
        """Targets for one image.

        Parameters
        ----------
        gt_boxes : array-like [M, 4]
            Corner boxes in input pixels; rows from the first one with a negative coordinate
            on are padding (the reference stops there).
        gt_ids : array-like [M] or [M, 1]
            Class indices.
        gt_mixratio : array-like [M] or [M, 1], optional
            Mixup weights, the objectness of each box (1 without mixup).

        Returns
        -------
        tuple of float32 ndarrays
            ``objectness [N, 1]``, ``center_targets [N, 2]``, ``scale_targets [N, 2]``,
            ``weights [N, 2]``, ``class_targets [N, num_class]`` (-1 where no box, one-hot
            where one is), as ``YOLOV3PrefetchTargetGenerator``'s outputs for batch item 0.
        """
        f32, f64 = np.float32, np.float64
        n = self.num_outputs
        objectness = np.zeros((n, 1), f32)
        center = np.zeros((n, 2), f32)
        scale = np.zeros((n, 2), f32)
        weights = np.zeros((n, 2), f32)
        classes = np.full((n, self.num_class), -1, f32)
        boxes = np.asarray(gt_boxes, dtype=f32).reshape(-1, 4)
        invalid = np.flatnonzero(~(boxes >= 0).all(axis=1))
        m = int(invalid[0]) if len(invalid) else len(boxes)
        if m == 0:
            return objectness, center, scale, weights, classes
        boxes = boxes[:m]
        ids = np.asarray(gt_ids, dtype=f32).reshape(-1)[:m]
        gtw = boxes[:, 2] - boxes[:, 0]
        gth = boxes[:, 3] - boxes[:, 1]
        gtx = boxes[:, 0] + gtw * f32(0.5)
        gty = boxes[:, 1] + gth * f32(0.5)
        match = np.argmax(zero_center_iou(self.anchors, gtw, gth), axis=1)
        layer = self._anchor_layer[match]
        lh, lw = self._layer_hw[layer, 0], self._layer_hw[layer, 1]
        # scalar float32 / int is float64 in NumPy 1.x scalar math
        fx = gtx.astype(f64) / self.width * lw
        fy = gty.astype(f64) / self.height * lh
        loc_x, loc_y = np.trunc(fx).astype(np.int64), np.trunc(fy).astype(np.int64)
        cell = loc_y * lw + loc_x
        if np.any(cell >= self._layer_cells[layer]):
            # the reference's flat index runs past this layer: into cells another layer's
            # anchors own (dropped by its final slicing) or out of the array (an IndexError)
            total = int(np.sum(self._layer_cells))
            flat = np.concatenate([[0], np.cumsum(self._layer_cells)])[layer] + cell
            if np.any(flat >= total):
                raise IndexError('a box centre lies outside the {}x{} input: {}'.format(
                    self.width, self.height, boxes[flat >= total][0]))
        keep = cell < self._layer_cells[layer]
        # a later box on the same (cell, anchor) overwrites an earlier one: keep the last
        pos = self._out_start[layer] + cell * self._layer_anchors[layer] + \
            self._anchor_in_layer[match]
        rev = np.arange(m)[::-1]
        _, first_in_rev = np.unique(pos[rev], return_index=True)
        last = np.zeros(m, bool)
        last[rev[first_in_rev]] = True
        sel = np.flatnonzero(keep & last)
        if len(sel) == 0:
            return objectness, center, scale, weights, classes
        p = pos[sel]
        anc = self.anchors[match[sel]]
        center[p, 0] = (fx[sel] - loc_x[sel]).astype(f32)
        center[p, 1] = (fy[sel] - loc_y[sel]).astype(f32)
        scale[p, 0] = _log_ratio(gtw[sel], anc[:, 0])
        scale[p, 1] = _log_ratio(gth[sel], anc[:, 1])
        wgt = ((2.0 - (gtw[sel] * gth[sel]).astype(f64) / self.width / self.height)
               .astype(f32))
        weights[p, 0] = wgt
        weights[p, 1] = wgt
        if gt_mixratio is None:
            objectness[p, 0] = 1
        else:
            objectness[p, 0] = np.asarray(gt_mixratio, dtype=f32).reshape(-1)[:m][sel]
        classes[p] = 0
        classes[p, ids[sel].astype(np.int64)] = 1
        return objectness, center, scale, weights, classes


def _log_ratio(size, anchor):
    """``np.log(max(size, 1) / anchor)`` as the reference's scalars compute it, as float32."""
    out = np.empty(len(size), np.float32)
    big = ~(size < 1)  # max(gtw, 1) keeps gtw unless 1 > gtw (NaN stays gtw)
    out[big] = np.log(size[big] / anchor[big])
    out[~big] = np.log(1 / anchor[~big].astype(np.float64)).astype(np.float32)
    return out


def _np(x):
    """An ``mx.nd.NDArray`` (or anything array-like) as numpy."""
    return x.asnumpy() if hasattr(x, 'asnumpy') else x
