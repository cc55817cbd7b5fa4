"""Scene-Graph-Benchmark's modeling code as a live handle, and the seeded inputs shared by the
reference cases and our side of ``test_sgg_against_sgb.py``.

SGB's files are copied into a temporary ``maskrcnn_benchmark`` package; its compiled ops are
replaced by a transcription of its NMS kernels (``+1`` areas, union-first IoU, in float64,
kept by descending score, IoU ``>`` suppresses as in ``nms.cu``; ``nms_cpu.cpp``'s ``>=``,
what ours does on the CPU, decides nothing here: no IoU of these cases equals the
threshold; the CPU rule is tested against ``nms_cpu.cpp`` written out in float32 in
``tests/torch/ops/test_ops_nms.py``);
``np.float`` and the loss's ``.cuda()`` are patched away (both crash on current NumPy /
CPU-only torch).
"""
import importlib
import os
import sys
import tempfile

import numpy as np
import torch

from fixtures.recorded import assert_close_to_recording, reference_source

CHECKOUT = 'Scene-Graph-Benchmark.pytorch'
FILES = ['structures/bounding_box.py', 'structures/boxlist_ops.py', 'modeling/utils.py',
         'modeling/box_coder.py', 'modeling/matcher.py',
         'modeling/balanced_positive_negative_sampler.py', 'modeling/rpn/anchor_generator.py',
         'modeling/rpn/inference.py', 'modeling/rpn/loss.py', 'modeling/rpn/utils.py',
         'modeling/roi_heads/relation_head/sampling.py',
         'modeling/roi_heads/relation_head/inference.py',
         'modeling/roi_heads/relation_head/utils_relation.py',
         'modeling/roi_heads/relation_head/loss.py', 'modeling/roi_heads/box_head/inference.py',
         'modeling/roi_heads/box_head/sampling.py', 'modeling/roi_heads/box_head/loss.py',
         'layers/smooth_l1_loss.py', 'layers/label_smoothing_loss.py',
         'utils/model_serialization.py']
LAYERS = '''
import torch
from .smooth_l1_loss import smooth_l1_loss
from .label_smoothing_loss import Label_Smoothing_Regression
def nms(boxes, scores, thresh):
    order = scores.sort(0, descending=True)[1].tolist()
    b = boxes.tolist()
    area = [(x2 - x1 + 1) * (y2 - y1 + 1) for x1, y1, x2, y2 in b]
    supp, keep = set(), []
    for a, i in enumerate(order):
        if i in supp:
            continue
        keep.append(i)
        for j in order[a + 1:]:
            if j in supp:
                continue
            w = max(0., min(b[i][2], b[j][2]) - max(b[i][0], b[j][0]) + 1)
            h = max(0., min(b[i][3], b[j][3]) - max(b[i][1], b[j][1]) + 1)
            if w * h / (area[i] + area[j] - w * h) > thresh:
                supp.add(j)
    return torch.tensor(keep, dtype=torch.long)
'''
#: handle key -> module under ``maskrcnn_benchmark.``
MODULES = {'bounding_box': 'structures.bounding_box', 'box_coder': 'modeling.box_coder',
           'anchor_generator': 'modeling.rpn.anchor_generator',
           'rel_sampling': 'modeling.roi_heads.relation_head.sampling',
           'rel_inference': 'modeling.roi_heads.relation_head.inference',
           'rel_loss': 'modeling.roi_heads.relation_head.loss',
           'box_inference': 'modeling.roi_heads.box_head.inference',
           'box_sampling': 'modeling.roi_heads.box_head.sampling',
           'box_loss': 'modeling.roi_heads.box_head.loss',
           'rpn_inference': 'modeling.rpn.inference', 'rpn_loss': 'modeling.rpn.loss',
           'matcher': 'modeling.matcher',
           'sampler': 'modeling.balanced_positive_negative_sampler',
           'model_serialization': 'utils.model_serialization'}


def _purge():
    for k in [k for k in sys.modules if k.split('.')[0] == 'maskrcnn_benchmark']:
        del sys.modules[k]


def load_sgb():
    """SGB's modeling modules, imported from a temporary package, or None without SGB.

    Returns
    -------
    dict of str to module or None
        Keyed as :data:`MODULES`. The modules keep their globals after import (none of these
        files imports anything lazily), so the package is then dropped from ``sys.modules`` and
        ``sys.path`` and its folder removed: nothing is left that another test module's own
        ``maskrcnn_benchmark`` could meet.
    """
    sources = {f: reference_source(CHECKOUT, 'maskrcnn_benchmark/' + f) for f in FILES}
    if not all(sources.values()):
        return None
    with tempfile.TemporaryDirectory(prefix='sgb-modeling-') as root:
        pkg = os.path.join(root, 'maskrcnn_benchmark')
        for f, src in sources.items():
            src = src.replace('dtype=np.float)', 'dtype=np.float64)').replace(').cuda()', ')')
            path = os.path.join(pkg, f)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as out:
                out.write(src)
        for d, _, _ in os.walk(pkg):
            open(os.path.join(d, '__init__.py'), 'a').close()
        with open(os.path.join(pkg, 'layers', '__init__.py'), 'w') as out:
            out.write(LAYERS)
        with open(os.path.join(pkg, 'utils', 'imports.py'), 'w') as out:
            out.write('import_file = None\n')
        _purge()  # another module's copy must not hide this one
        sys.path.insert(0, root)
        try:
            return {k: importlib.import_module('maskrcnn_benchmark.' + v)
                    for k, v in MODULES.items()}
        finally:
            sys.path.remove(root)
            _purge()


def boxes(n, g, w=200, h=150):
    """``n`` random ``xyxy`` boxes inside a ``w`` x ``h`` image, drawn from generator ``g``."""
    xy = torch.rand(n, 2, generator=g) * torch.tensor([w * .7, h * .7])
    wh = torch.rand(n, 2, generator=g) * torch.tensor([w * .4, h * .4]) + 2
    return torch.cat([xy, (xy + wh).clamp(max=torch.tensor([w - 1., h - 1.]))], 1)


def boxlist(cls, b, size, **fields):
    """``cls(b, size)`` (ours or SGB's BoxList) with cloned ``fields``."""
    out = cls(b.clone(), size)
    for k, v in fields.items():
        out.add_field(k, v.clone())
    return out


def same(ref, got, atol=None):
    """Assert that tensor ``got`` equals the reference array ``ref``.

    Parameters
    ----------
    ref : numpy.ndarray
        The reference's output (recorded or live).
    got : torch.Tensor
        Ours.
    atol : float, optional
        None: exactly equal, same shape (``torch.equal``); else ``torch.allclose`` with it.
    """
    ref = torch.from_numpy(np.asarray(ref))
    got = got.detach()
    if got.dim() == 0 and tuple(ref.shape) == (1,):
        # write_npz stores through np.ascontiguousarray, which makes a 0-d array 1-d: a
        # recorded scalar comes back with shape (1,)
        ref = ref.reshape(())
    assert tuple(ref.shape) == tuple(got.shape), (tuple(ref.shape), tuple(got.shape))
    if atol is None:
        assert torch.equal(ref.to(got.dtype), got), (ref, got)
    else:
        assert torch.allclose(ref.to(got.dtype), got, atol=atol), (ref, got)


#: A float32 output of a short chain of ops (box decoding, clipping, softmax, a loss) against a
#: recording made on another machine: 8 float32 ulps (2**-23 relative each) of the array's
#: largest value. Each side rounds each of its few steps by half an ulp of the largest term,
#: and ATen's kernels differ by that much per step between instruction sets (its AVX2 loops
#: fuse multiply-adds, its ``default`` ones do not; measured under ATEN_CPU_CAPABILITY=default:
#: the recorded post-processor scores, features and sampled boxes move by one or two ulps).
RECORDED_RTOL = 8 * 2.0 ** -23


def same_as(source):
    """:func:`same` for a test's ``source``: live (SGB's code, here, now) bit for bit; recorded
    (another machine) integers exactly and floats within ``RECORDED_RTOL`` of their largest
    value, unless the test passes its own ``atol``."""
    def compare(ref, got, atol=None):
        if source == 'live' or atol is not None or not got.is_floating_point():
            same(ref, got, atol)
        else:
            assert_close_to_recording(ref, got, rtol=RECORDED_RTOL)
    return compare


def compact(t):
    """``t`` as uint8 when it is an integer tensor whose values all lie in 0-255 (the sampled
    labels, pair indices and 0/1 matrices), else unchanged: the same values in an eighth of the
    recording; :func:`same` compares values, not dtypes (as ``torch.equal`` did)."""
    if not t.dtype.is_floating_point and t.dtype != torch.bool and (
            t.numel() == 0 or (int(t.min()) >= 0 and int(t.max()) <= 255)):
        return t.to(torch.uint8)
    return t


# --- the seeded inputs of each case, shared by the reference's side and ours ---

def gtbox_inputs(seed):
    """Ground truth of ``test_gtbox_relsample`` for ``seed``: ``(boxes, relation matrix)``."""
    n = 3 + seed % 7
    g = torch.Generator().manual_seed(seed)
    rel = (torch.rand(n, n, generator=g) < 0.3).long() * torch.randint(1, 5, (n, n),
                                                                       generator=g)
    rel.fill_diagonal_(0)
    return boxes(n, g), rel


def detect_inputs(seed):
    """``(gt boxes, gt labels, relation, proposals, proposal labels)`` of
    ``test_detect_relsample_and_test_pairs`` for ``seed``."""
    g = torch.Generator().manual_seed(100 + seed)
    nt = 3 + seed % 4
    tb, tl = boxes(nt, g), torch.randint(1, 4, (nt,), generator=g)
    rel = (torch.rand(nt, nt, generator=g) < 0.5).long() * torch.randint(1, 5, (nt, nt),
                                                                         generator=g)
    rel.fill_diagonal_(0)
    pb = torch.cat([tb.repeat(3, 1) + torch.randn(3 * nt, 4, generator=g) * 3,
                    boxes(5, g)]).clamp(min=0)
    pb[:, 2:] = torch.max(pb[:, 2:], pb[:, :2] + 1)
    pl = torch.cat([tl.repeat(3), torch.randint(0, 4, (5,), generator=g)])
    pl[torch.rand(len(pl), generator=g) < 0.2] = 0
    return tb, tl, rel, pb, pl


def relation_inputs():
    """Inputs of ``test_relation_post_processor_and_loss``, drawn in the old test's order:
    ``post`` (one dict per ``use_gt`` in (True, False)) and ``loss``."""
    g = torch.Generator().manual_seed(1)
    post = []
    for _ in (True, False):
        n, k = 6, 12
        b = boxes(n, g)
        per_cls = b[:, None].repeat(1, 5, 1) + torch.randn(n, 5, 4, generator=g)
        ol, rl = torch.randn(n, 5, generator=g), torch.randn(k, 4, generator=g)
        pairs = torch.randint(0, n, (k, 2), generator=g)
        post.append(dict(b=b, per_cls=per_cls, ol=ol, rl=rl, pairs=pairs))
    pb = boxes(5, g)
    labels = torch.randint(0, 5, (5,), generator=g)
    rl, ol = [torch.randn(7, 4, generator=g)], [torch.randn(5, 5, generator=g)]
    lab = [torch.randint(0, 4, (7,), generator=g)]
    return post, dict(pb=pb, labels=labels, rl=rl, ol=ol, lab=lab)


def box_post_inputs():
    """Inputs of ``test_box_post_processor``: one dict per ``dup`` in (True, False)."""
    g = torch.Generator().manual_seed(2)
    out = []
    for _ in (True, False):
        n, c = 40, 6
        b = boxes(n, g)
        logits = torch.randn(n, c, generator=g) * 2
        reg = torch.randn(n, 4 * c, generator=g) * 0.5
        feats = torch.randn(n, 3, generator=g)
        out.append(dict(b=b, logits=logits, reg=reg, feats=feats,
                        labels=torch.randint(0, c, (n,), generator=g)))
    return out


def box_sampler_inputs():
    """``(generator, gt boxes, gt labels, proposals)`` of ``test_box_sampler_and_loss``; the
    generator then draws the loss's logits and regression."""
    g = torch.Generator().manual_seed(3)
    tb, tl = boxes(4, g), torch.randint(1, 6, (4,), generator=g)
    pb = torch.cat([tb.repeat(4, 1) + torch.randn(16, 4, generator=g) * 6,
                    boxes(30, g)]).clamp(min=0)
    pb[:, 2:] = torch.max(pb[:, 2:], pb[:, :2] + 1)
    return g, tb, tl, pb
