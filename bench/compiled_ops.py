"""Our ops (``gluontrain.torch.ops``) against what the references' users run, at realistic sizes.

Usage (from the repository root)::

    GLUONTRAIN_REFERENCES=DIR python bench/compiled_ops.py [--build BUILD_DIR] [--repeats 9]
    python bench/compiled_ops.py --torchvision [--repeats 9]

The references' C++ CPU ops are compiled beforehand by ``tests/fixtures/build_reference_ops.py``
into ``BUILD_DIR`` (default ``$GLUONTRAIN_REFERENCES/_build``); without them this prints that
command and exits 0. Their Python is imported from the checkouts as it is (the fixture
generators' stand-ins replace only what is absent here: torchvision, apex, the extensions
not built), with the compiled modules loaded under the names it imports them by
(``maskrcnn_benchmark._C``, ``seamseg.utils.{nms,roi_sampling}._backend``). Compared, each
through the reference's own Python entry point:

- NMS over 2000 proposals: seamseg's ``utils.nms.nms`` (its ``nms_cpu.cpp``: all-pairs
  conflict bitmask, then a list walk; RPN 0.7 keeping 2000, detection 0.3) and
  maskrcnn-benchmark's ``layers.nms`` (``nms_cpu.cpp``: greedy loop with ``+1`` areas; RPN
  0.7, box head 0.5), inputs sorted by score as the RPN's top-k leaves them; plus the training
  RPN's own sizes (12000 candidates);
- ROIAlign: maskrcnn-benchmark's ``Pooler`` (``LevelMapper`` + ``ROIAlign_cpu.cpp`` per
  level) as SGB configures it (7x7, sampling ratio 2, scales 1/4..1/32) on the five FPN maps
  of two 800 x 1088 images (256 channels, P2..P6; the pooler pairs its four scales with the
  first four maps, as SGB's does), 512 ROIs; once more with our input maps in the
  channels-last layout (what a model run in ``torch.channels_last`` hands over: our CPU path
  then skips its copy of the maps). Forward only: maskrcnn-benchmark has no CPU ROIAlign
  backward (its ``ROIAlign.h`` raises "Not implemented on the CPU"): ours is timed alone;
- ROI sampling: seamseg's ``DetectionAlgoFPN._head`` (level choice + ``roi_sampling_cpu.cpp``
  per level, forward and backward) on the four maps it uses, 512 ROIs, 14x14;
- anchor / proposal matching (plain Python torch in both references): seamseg's
  ``AnchorMatcher`` (20000 anchors, 20 ground truths, subsampling included) and
  ``ProposalMatcher`` (2000 proposals), maskrcnn-benchmark's ``boxlist_iou`` + ``Matcher``
  (RPN: 0.7 / 0.3 with low-quality matches on the anchors; box head: 0.5 / 0.5 on the
  proposals).

``--torchvision`` instead times our plain-torch ops against torchvision's kernels through
``gluontrain.torch.ops``' dispatch (``GLUONTRAIN_TORCH_OPS=torchvision``; no reference
checkouts needed): seamseg's NMS rows and SGB's pooler, forward and forward + backward. The
reference rows time ours under ``GLUONTRAIN_TORCH_OPS=torch`` unless the variable is set.

Every pair is checked first: NMS keeps the same indices in the same order, matches are equal
(same seeds for the random subsampling), features within 3e-4 and gradients within 1e-3 of
each other: float32 rounding on N(0, 1) features (largest 5.6); the sample coordinates, up to
272 px on P2, are rounded differently (ours through ``grid_sample``'s normalised grid), and
each implementation is about 1e-4 from a float64 evaluation of the same maths. Then both are
timed alternately, one thread, median of ``--repeats`` runs; the table prints
``reference ms | ours ms | reference/ours`` (> 1: ours is faster).
"""
import argparse
import glob
import importlib.util
import os
import statistics
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures')
sys.path.insert(0, ROOT)
sys.path.insert(0, FIXTURES)
sys.path.insert(0, HERE)

import build_reference_ops as bro  # noqa: E402
from timing import median_seconds  # noqa: E402  (bench/timing.py)
from gluontrain.torch.ops import (box_iou, match_anchors, match_by_iou,  # noqa: E402
                                  match_proposals, multilevel_roi_align,
                                  multilevel_roi_sampling, nms, subsample_anchors)
from gluontrain.torch.ops.compiled import ENV, torchvision_version  # noqa: E402

BUILD_COMMAND = ('GLUONTRAIN_REFERENCES=DIR python tests/fixtures/build_reference_ops.py '
                 '[--out BUILD_DIR]')
IMG = (800, 1088)  # padded input (H, W), a multiple of 32 as both references pad
SGB_SCALES = (0.25, 0.125, 0.0625, 0.03125)


def _load_extension(name, path):
    """Load the extension at ``path`` (under its own name, which its init function carries)
    and register it as ``name``, where the reference's Python imports it from."""
    spec = importlib.util.spec_from_file_location(os.path.basename(path).split('.')[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def compiled_paths(build):
    """``{module name: .so path}`` of the compiled ops under ``build``; the missing ones map to
    None."""
    found = sorted(glob.glob(os.path.join(build, 'maskrcnn_benchmark', '_C*.so')))
    paths = {'maskrcnn_benchmark._C': found[0] if found else None}
    for name in ('nms', 'roi_sampling'):
        paths['seamseg.utils.%s._backend' % name] = bro.seamseg_backend_path(build, name)
    return paths


def import_references(paths):
    """The references' Python entry points, with the compiled modules of ``paths``."""
    import make_reference_fixtures as mrf  # pylint: disable=import-outside-toplevel
    for name, path in paths.items():
        _load_extension(name, path)
    for checkout in ('maskrcnn-benchmark', 'seamseg', 'inplace_abn'):
        mrf.reference_root(checkout)
    mrf.maskrcnn_stubs()  # the loaded _C is found in sys.modules before any stand-in
    mrf.install_stubs(['inplace_abn._backend', 'seamseg.*._backend', 'seamseg._version'],
                      {'seamseg._version': {'version': 'source'}})
    # pylint: disable=import-outside-toplevel,import-error
    from maskrcnn_benchmark.layers import nms as mb_nms
    from maskrcnn_benchmark.modeling.matcher import Matcher
    from maskrcnn_benchmark.modeling.poolers import Pooler
    from maskrcnn_benchmark.structures.bounding_box import BoxList
    from maskrcnn_benchmark.structures.boxlist_ops import boxlist_iou
    from seamseg.algos.detection import ProposalMatcher
    from seamseg.algos.fpn import DetectionAlgoFPN
    from seamseg.algos.rpn import AnchorMatcher
    from seamseg.utils.nms import nms as ss_nms
    from seamseg.utils.parallel import PackedSequence
    return dict(mb_nms=mb_nms, Matcher=Matcher, Pooler=Pooler, BoxList=BoxList,
                boxlist_iou=boxlist_iou, ProposalMatcher=ProposalMatcher,
                DetectionAlgoFPN=DetectionAlgoFPN, AnchorMatcher=AnchorMatcher, ss_nms=ss_nms,
                PackedSequence=PackedSequence)


# ----------------------------------------------------------------------------- inputs
def scene(gen, num_gt=20):
    """Ground-truth boxes ``(x1, y1, x2, y2)`` of 16..600 px inside the image."""
    side = torch.exp(torch.empty(num_gt, 2).uniform_(np.log(16), np.log(600), generator=gen))
    lo = torch.rand(num_gt, 2, generator=gen) * (torch.tensor(IMG[::-1]) - side)
    return torch.cat([lo, lo + side], 1)


def proposals_around(gt, num, gen, jitter=0.25):
    """``num`` proposals: three quarters jittered copies of the ground truth (the clusters NMS
    thins out), the rest anywhere, clipped to the image; scores descending as after top-k."""
    near = num * 3 // 4
    base = gt[torch.randint(0, gt.shape[0], (near,), generator=gen)]
    size = (base[:, 2:] - base[:, :2]).repeat(1, 2)
    boxes = base + torch.randn(near, 4, generator=gen) * jitter * size
    far = scene(gen, num - near)
    boxes = torch.cat([boxes, far])
    boxes = torch.min(boxes.clamp(min=0), torch.tensor(IMG[::-1] * 2, dtype=torch.float32) - 1)
    boxes[:, 2:] = torch.max(boxes[:, 2:], boxes[:, :2] + 1)
    scores = torch.sort(torch.rand(num, generator=gen), descending=True)[0]
    return boxes[torch.randperm(num, generator=gen)], scores


def anchors(num, gen):
    """``num`` anchors of 32..512 px and ratios 1:2, 1:1, 2:1 centred anywhere in the image (the
    ones across the border are void / straddling, as on a real grid)."""
    centre = torch.rand(num, 2, generator=gen) * torch.tensor(IMG[::-1])
    size = 2.0 ** torch.randint(5, 10, (num, 1), generator=gen)
    ratio = torch.tensor([0.5, 1.0, 2.0])[torch.randint(0, 3, (num,), generator=gen)]
    half = torch.stack([size[:, 0] * ratio.sqrt(), size[:, 0] / ratio.sqrt()], 1) / 2
    return torch.cat([centre - half, centre + half], 1)


def yx(boxes):
    """seamseg's ``(y0, x0, y1, x1)`` layout of ``(x1, y1, x2, y2)`` boxes."""
    return boxes[:, [1, 0, 3, 2]].contiguous()


# ----------------------------------------------------------------------------- timing
def timed_pair(ref, ours, repeats):
    """Median seconds of ``ref`` and ``ours``, run alternately (shared cores drift)."""
    t_ref, t_ours = [], []
    for _ in range(repeats):
        for fn, times in ((ref, t_ref), (ours, t_ours)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(t_ref), statistics.median(t_ours)




def fwd_bwd(fn, feats, grad):
    """``fn(feats)``'s forward and backward with upstream gradient ``grad``; returns the output
    and the features' gradients."""
    def run():
        for f in feats:
            f.grad = None
        out = fn(feats)
        out.backward(grad)
        return out.detach(), [torch.zeros_like(f) if f.grad is None else f.grad.clone()
                              for f in feats]  # a map no ROI reads gets no gradient
    return run


def assert_close(name, a, b, atol=3e-4):
    """Refuse to time a pair whose outputs differ."""
    if a.shape != b.shape:
        raise SystemExit('%s: outputs differ (shapes %s / %s): not timed'
                         % (name, tuple(a.shape), tuple(b.shape)))
    err = float((a - b).abs().max()) if a.numel() else 0.0
    if not err <= atol:
        raise SystemExit('%s: outputs differ (max abs %.3g): not timed' % (name, err))
    return err


def assert_equal(name, a, b):
    """Refuse to time a pair whose integer outputs differ."""
    if a.tolist() != b.tolist():
        raise SystemExit('%s: outputs differ (%d / %d entries): not timed'
                         % (name, a.numel(), b.numel()))


# ----------------------------------------------------------------------------- cases
def nms_cases(ref, gen):
    """(name, reference fn, our fn) of every NMS row."""
    gt = scene(gen)
    cases = []
    for num, thr, n_max, label in ((2000, 0.7, 2000, 'RPN 0.7'), (2000, 0.3, 0, 'detection 0.3'),
                                   (12000, 0.7, 2000, 'RPN train 12000 -> 2000')):
        boxes, scores = proposals_around(gt, num, gen)
        bb, ss = yx(boxes), scores

        def ss_ref(bb=bb, ss=ss, thr=thr, n_max=n_max):
            return ref['ss_nms'](bb, ss, thr, n_max)

        def ss_ours(bb=bb, ss=ss, thr=thr, n_max=n_max):
            return nms(bb, ss, thr, suppress_equal=True, reference='seamseg',
                       max_output=n_max or None)
        cases.append(('seamseg nms, %d boxes, %s' % (num, label), ss_ref, ss_ours))
    for num, thr, label in ((2000, 0.7, 'RPN 0.7'), (2000, 0.5, 'box head 0.5'),
                            (12000, 0.7, 'RPN train 12000')):
        boxes, scores = proposals_around(gt, num, gen)
        order = torch.sort(scores, descending=True)[1]
        # sorted as the RPN's top-k leaves them: the kernel returns kept indices in index order
        bb, ss = boxes[order].contiguous(), scores[order].contiguous()

        def mb_ref(bb=bb, ss=ss, thr=thr):
            return ref['mb_nms'](bb, ss, thr)

        def mb_ours(bb=bb, ss=ss, thr=thr):
            return nms(bb, ss, thr, suppress_equal=True, plus_one=True, reference='seamseg')
        cases.append(('maskrcnn-benchmark nms, %d boxes, %s' % (num, label), mb_ref, mb_ours))
    return cases


def fpn_maps(gen, levels=5, channels=256, batch=2):
    """FPN feature maps P2.. of ``batch`` padded images (strides 4, 8, ...)."""
    return [torch.randn(batch, channels, -(-IMG[0] // 2 ** k), -(-IMG[1] // 2 ** k),
                        generator=gen) for k in range(2, 2 + levels)]


def roi_boxes(gen, num=512, batch=2):
    """``num`` ROIs (``batch`` images): sides 8..700 px log-uniform so that every FPN level gets
    some, inside the image; and each one's image."""
    boxes = scene(gen, num)
    side = torch.exp(torch.empty(num, 2).uniform_(np.log(8), np.log(700), generator=gen))
    lo = torch.rand(num, 2, generator=gen) * (torch.tensor(IMG[::-1]) - side)
    boxes = torch.cat([lo, lo + side], 1)
    idx = torch.sort(torch.randint(0, batch, (num,), generator=gen))[0]
    return boxes, idx


def roi_cases(ref, gen, repeats):
    """ROIAlign (forward) and ROI sampling (forward, forward + backward) rows; checks first."""
    feats = fpn_maps(gen)
    boxes, idx = roi_boxes(gen)
    rows = []
    pooler = ref['Pooler']((7, 7), SGB_SCALES, 2)
    lists = [ref['BoxList'](boxes[idx == n], IMG[::-1]) for n in range(feats[0].shape[0])]

    def mb_ref():
        return pooler(feats, lists)

    def mb_ours():
        return multilevel_roi_align(feats, boxes, idx, SGB_SCALES, (7, 7), 2)
    feats_cl = [f.contiguous(memory_format=torch.channels_last) for f in feats]

    def mb_ours_cl():
        return multilevel_roi_align(feats_cl, boxes, idx, SGB_SCALES, (7, 7), 2)
    with torch.no_grad():
        err = assert_close('ROIAlign', mb_ref(), mb_ours())
        rows.append(('maskrcnn-benchmark Pooler + ROIAlign_cpu, 512 ROIs, 7x7 sr 2, fwd',
                     err) + timed_pair(mb_ref, mb_ours, repeats))
        err = assert_close('ROIAlign', mb_ref(), mb_ours_cl())
        rows.append(('the same, our input maps channels-last (the reference\'s NCHW)', err)
                    + timed_pair(mb_ref, mb_ours_cl, repeats))
    grad = torch.randn(512, 256, 7, 7, generator=gen)
    ours_fb = fwd_bwd(lambda f: multilevel_roi_align(f, boxes, idx, SGB_SCALES, (7, 7), 2),
                      [f.requires_grad_() for f in feats], grad)
    rows.append(('ours ROIAlign fwd+bwd (no CPU backward in the reference)', None, None,
                 median_seconds(ours_fb, repeats)))
    for f in feats:
        f.requires_grad_(False)

    # seamseg: its first four maps, (y0, x0, y1, x1) boxes
    ss_feats = [f.detach() for f in feats[:4]]
    algo = ref['DetectionAlgoFPN'](None, None, None, {'stuff': 0}, [10., 10., 5., 5.], 224, 2,
                                   (14, 14), 0, 4)
    bb = yx(boxes)

    def ss_ref(f):
        return algo._head(lambda r: r, f, bb, idx, IMG)  # pylint: disable=protected-access

    def ss_ours(f):
        return multilevel_roi_sampling(f, bb, idx, IMG, (14, 14), 224, 2, 0)
    with torch.no_grad():
        err = assert_close('roi_sampling', ss_ref(ss_feats), ss_ours(ss_feats))
        rows.append(('seamseg _head + roi_sampling_cpu, 512 ROIs, 14x14, fwd', err)
                    + timed_pair(lambda: ss_ref(ss_feats), lambda: ss_ours(ss_feats), repeats))
    grad = torch.randn(512, 256, 14, 14, generator=gen)
    leaves = [f.clone().requires_grad_() for f in ss_feats]
    ref_fb, ours_fb = fwd_bwd(ss_ref, leaves, grad), fwd_bwd(ss_ours, leaves, grad)
    (a, ga), (b, gb) = ref_fb(), ours_fb()
    err = max([assert_close('roi_sampling', a, b)]
              + [assert_close('roi_sampling grad', x, y, 1e-3) for x, y in zip(ga, gb)])
    rows.append(('seamseg _head + roi_sampling_cpu, 512 ROIs, 14x14, fwd+bwd', err)
                + timed_pair(ref_fb, ours_fb, repeats))
    return rows


def matching_cases(ref, gen):
    """(name, reference fn, our fn) of the matching rows; each returns an integer tensor."""
    gt = scene(gen)
    anc = anchors(20000, gen)
    props = proposals_around(gt, 2000, gen)[0]
    valid = IMG
    gt_yx, anc_yx, props_yx = yx(gt), yx(anc), yx(props)
    anchor_matcher = ref['AnchorMatcher'](256, .5, .7, .3, 0.)
    proposal_matcher = ref['ProposalMatcher']({'stuff': 0}, 128, .25, .5, .5, 0., 0.)
    cat = torch.zeros(gt.shape[0], dtype=torch.long)

    def ss_anchor_ref():
        torch.manual_seed(0)
        return anchor_matcher(anc_yx, [gt_yx], [None], [valid])[0]

    def ss_anchor_ours():
        torch.manual_seed(0)
        return subsample_anchors(match_anchors(anc_yx, gt_yx, None, valid, .7, .3, 0.), 256, .5)

    def ss_prop_ref():
        np.random.seed(0)
        rois, match = proposal_matcher(ref['PackedSequence']([props_yx]), [gt_yx], [cat], [None])
        return torch.cat([rois[0].view(-1), match[0].float()])

    def ss_prop_ours():
        np.random.seed(0)
        rois, match = match_proposals(props_yx, gt_yx, None, .5, .5, 0., 0., 128, .25)
        return torch.cat([rois.view(-1), match.float()])

    size = IMG[::-1]
    gt_list = ref['BoxList'](gt, size)
    anc_list, prop_list = ref['BoxList'](anc, size), ref['BoxList'](props, size)
    rpn_matcher, head_matcher = ref['Matcher'](.7, .3, True), ref['Matcher'](.5, .5, False)
    return [
        ('seamseg AnchorMatcher, 20000 anchors, 20 gt (Python)', ss_anchor_ref, ss_anchor_ours),
        ('seamseg ProposalMatcher, 2000 proposals, 20 gt (Python)', ss_prop_ref, ss_prop_ours),
        ('maskrcnn-benchmark boxlist_iou + Matcher, 20000 anchors (Python)',
         lambda: rpn_matcher(ref['boxlist_iou'](gt_list, anc_list)),
         lambda: match_by_iou(box_iou(gt, anc, plus_one=True), .7, .3, True)),
        ('maskrcnn-benchmark boxlist_iou + Matcher, 2000 proposals (Python)',
         lambda: head_matcher(ref['boxlist_iou'](gt_list, prop_list)),
         lambda: match_by_iou(box_iou(gt, props, plus_one=True), .5, .5)),
    ]


def torchvision_rows(gen, repeats):
    """Ours (plain torch) against torchvision's kernels through the dispatch, on the inputs of
    the seamseg NMS rows and SGB's pooler; checked first, then timed alternately."""
    def under(value, fn):
        def run():
            os.environ[ENV] = value
            return fn()
        return run
    gt, rows = scene(gen), []
    for num, thr, n_max, label in ((2000, 0.7, 2000, 'RPN 0.7'), (2000, 0.3, 0, 'detection 0.3'),
                                   (12000, 0.7, 2000, 'RPN train 12000 -> 2000')):
        boxes, scores = proposals_around(gt, num, gen)
        name = 'nms (seamseg, IoU >=), %d boxes, %s' % (num, label)
        fn = (lambda bb=yx(boxes), ss=scores, thr=thr, n_max=n_max: nms(
            bb, ss, thr, suppress_equal=True, reference='seamseg', max_output=n_max or None))
        tv_fn, ours_fn = under('torchvision', fn), under('torch', fn)
        assert_equal(name, tv_fn(), ours_fn())
        rows.append((name, 0.0) + timed_pair(tv_fn, ours_fn, repeats))
    feats = fpn_maps(gen)
    boxes, idx = roi_boxes(gen)

    def pool(f):
        return multilevel_roi_align(f, boxes, idx, SGB_SCALES, (7, 7), 2)
    name = 'SGB pooler (multilevel_roi_align), 512 ROIs, 7x7 sr 2'
    with torch.no_grad():
        tv_fn = under('torchvision', lambda: pool(feats))
        ours_fn = under('torch', lambda: pool(feats))
        err = assert_close(name, tv_fn(), ours_fn())
        rows.append((name + ', fwd', err) + timed_pair(tv_fn, ours_fn, repeats))
    grad = torch.randn(512, 256, 7, 7, generator=gen)
    run = fwd_bwd(pool, [f.requires_grad_() for f in feats], grad)
    tv_fn, ours_fn = under('torchvision', run), under('torch', run)
    (a, ga), (b, gb) = tv_fn(), ours_fn()
    err = max([assert_close(name, a, b)] + [assert_close(name + ' grad', x, y, 1e-3)
                                            for x, y in zip(ga, gb)])
    rows.append((name + ', fwd+bwd', err) + timed_pair(tv_fn, ours_fn, repeats))
    return rows


def print_rows(rows, first):
    """The table: ``first`` is the compared side's name."""
    print('| op | max abs diff | %s ms | ours ms | %s/ours |' % (first, first))
    print('|---|---|---|---|---|')
    for name, err, t_ref, t_ours in rows:
        if t_ref is None:
            print('| %s | | | %.1f | |' % (name, t_ours * 1e3))
        else:
            print('| %s | %s | %.1f | %.1f | %.2fx |' % (name, '%.1e' % err if err else '0',
                                                      t_ref * 1e3, t_ours * 1e3, t_ref / t_ours))


def main(argv=None):
    """Command-line entry point."""
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--build', help='compiled ops folder (default $GLUONTRAIN_REFERENCES/_build)')
    p.add_argument('--repeats', type=int, default=9)
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--torchvision', action='store_true',
                   help='ours against torchvision\'s kernels (no references needed)')
    args = p.parse_args(argv)
    if args.torchvision:
        if torchvision_version() is None:
            print('skipped: torchvision does not load here')
            return 0
        torch.set_num_threads(args.threads)
        previous = os.environ.get(ENV)
        try:
            rows = torchvision_rows(torch.Generator().manual_seed(0), args.repeats)
        finally:  # each timed call sets the variable
            os.environ.pop(ENV, None)
            if previous is not None:
                os.environ[ENV] = previous
        print('torch %s, torchvision %s, %d thread(s), median of %d alternating runs; outputs '
              'checked first\n' % (torch.__version__, torchvision_version(), args.threads,
                                    args.repeats))
        print_rows(rows, 'torchvision')
        return 0
    refs = os.environ.get('GLUONTRAIN_REFERENCES', '')
    build = args.build or (os.path.join(refs, '_build') if refs else '')
    paths = compiled_paths(build) if build else {}
    missing = sorted(n for n, path in paths.items() if path is None)
    if not refs or not os.path.isdir(refs) or not paths or missing:
        print('skipped: the references\' compiled CPU ops are not built (%s); build them with\n'
              '    %s\nthen run GLUONTRAIN_REFERENCES=DIR python bench/compiled_ops.py'
              % (', '.join(missing) if missing else 'GLUONTRAIN_REFERENCES is not set',
                 BUILD_COMMAND))
        return 0
    torch.set_num_threads(args.threads)
    os.environ.setdefault(ENV, 'torch')  # "ours": the plain-torch ops, unless asked otherwise
    ref = import_references(paths)
    gen = torch.Generator().manual_seed(0)
    rows = []
    for name, ref_fn, ours_fn in nms_cases(ref, gen) + matching_cases(ref, gen):
        a, b = ref_fn(), ours_fn()
        if a.is_floating_point():
            assert_close(name, a, b, 0.0)
        else:
            assert_equal(name, a, b)
        rows.append((name, 0.0) + timed_pair(ref_fn, ours_fn, args.repeats))
    rows += roi_cases(ref, gen, args.repeats)
    print('torch %s, %d thread(s), median of %d alternating runs; outputs checked first (NMS: '
          'same indices, same order; matches equal; features: max abs diff)\n'
          % (torch.__version__, args.threads, args.repeats))
    print_rows(rows, 'reference')
    return 0


if __name__ == '__main__':
    sys.exit(main())
