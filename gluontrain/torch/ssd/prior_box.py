"""Default (prior) boxes of SSD300, as ``layers/functions/prior_box.py`` of ssd.pytorch."""
import math

import torch

__all__ = ['PriorBox']


class PriorBox:
    """Prior boxes in centre-size form ``(cx, cy, w, h)``, relative to the image size.

    For feature map ``k`` of size ``f`` the cells are visited row-major (row ``i`` gives
    ``cy``, column ``j`` gives ``cx``) with ``cx = (j + 0.5) / f_k``, ``f_k = min_dim /
    steps[k]``; each cell yields, in this order, ``(s_k, s_k)``, ``(s_k', s_k')`` with
    ``s_k' = sqrt(s_k * max_sizes[k] / min_dim)``, then for every aspect ratio ``ar`` the pair
    ``(s_k sqrt(ar), s_k / sqrt(ar))``, ``(s_k / sqrt(ar), s_k sqrt(ar))``, where
    ``s_k = min_sizes[k] / min_dim``. With ``cfg['clip']`` every coordinate is clamped to
    ``[0, 1]``.

    Parameters
    ----------
    cfg : dict
        An SSD configuration (see :mod:`gluontrain.torch.ssd.config`): ``min_dim``,
        ``feature_maps``, ``steps``, ``min_sizes``, ``max_sizes``, ``aspect_ratios``,
        ``variance``, ``clip`` and ``name``.

    Raises
    ------
    ValueError
        If a variance is not positive.
    """

    def __init__(self, cfg):
        self.image_size = cfg['min_dim']
        self.num_priors = len(cfg['aspect_ratios'])
        self.variance = cfg['variance'] or [0.1]
        self.feature_maps = cfg['feature_maps']
        self.min_sizes = cfg['min_sizes']
        self.max_sizes = cfg['max_sizes']
        self.steps = cfg['steps']
        self.aspect_ratios = cfg['aspect_ratios']
        self.clip = cfg['clip']
        self.version = cfg['name']
        for v in self.variance:
            if v <= 0:
                raise ValueError('Variances must be greater than 0')

    def _cell_sizes(self, k):
        """The ``(w, h)`` of the boxes of one cell of map ``k``, in the reference's order."""
        s_k = self.min_sizes[k] / self.image_size
        s_k_prime = math.sqrt(s_k * (self.max_sizes[k] / self.image_size))
        sizes = [(s_k, s_k), (s_k_prime, s_k_prime)]
        for ar in self.aspect_ratios[k]:
            r = math.sqrt(ar)
            sizes += [(s_k * r, s_k / r), (s_k / r, s_k * r)]
        return sizes

    def forward(self):
        """Compute the prior boxes.

        Returns
        -------
        torch.Tensor
            ``float32`` of shape ``(num_priors, 4)`` (8732 for SSD300), ``(cx, cy, w, h)``.
        """
        # Everything is computed in float64 (Python floats in the reference) and rounded
        # to float32 once at the end, so every value is bit-identical to the reference's.
        out = []
        for k, f in enumerate(self.feature_maps):
            f_k = self.image_size / self.steps[k]
            centres = (torch.arange(f, dtype=torch.float64) + 0.5) / f_k
            cy, cx = torch.meshgrid(centres, centres, indexing='ij')  # row i -> cy
            wh = torch.tensor(self._cell_sizes(k), dtype=torch.float64)  # [A, 2]
            xy = torch.stack([cx.reshape(-1), cy.reshape(-1)], 1)  # [f*f, 2] row-major
            # every cell's centre with every (w, h): [f*f, A, 4]
            boxes = torch.cat(torch.broadcast_tensors(xy[:, None], wh[None]), 2)
            out.append(boxes.reshape(-1, 4))
        output = torch.cat(out).to(torch.float32)
        if self.clip:
            output.clamp_(max=1, min=0)
        return output

    __call__ = forward
