"""The scene-graph model pieces against Scene-Graph-Benchmark's own Python, run from the bare
mirror when it is present (skipped otherwise).

SGB's files are copied into a temporary ``maskrcnn_benchmark`` package; its compiled ops are
replaced by a literal transcription of ``nms_cpu.cpp`` (``+1`` areas, IoU ``>`` suppresses);
``np.float`` and the loss's ``.cuda()`` are patched away (both crash on current NumPy /
CPU-only torch). Same inputs, same global seeds: the outputs must be equal.
"""
import collections
import copy
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from sgg_model_helpers import tiny_cfg
from gluontrain.torch.sgg.modeling.box_head import BoxSampler, box_loss
from gluontrain.torch.sgg.modeling.box_inference import BoxCoder, BoxPostProcessor
from gluontrain.torch.sgg.modeling.inference import PostProcessor
from gluontrain.torch.sgg.modeling.load_mapping import (RELATION_LOAD_MAPPING,
                                                        align_and_update_state_dicts)
from gluontrain.torch.sgg.modeling.loss import RelationLossComputation
from gluontrain.torch.sgg.modeling.rpn import RPNModule, generate_anchors
from gluontrain.torch.sgg.modeling.sampling import RelationSampling
from gluontrain.torch.sgg.structures import BoxList

# The git directory of a Scene-Graph-Benchmark checkout under $GLUONTRAIN_REFERENCES
# (docs/testing.md); '' (tests skip) when it is not set.
_REFS = os.environ.get('GLUONTRAIN_REFERENCES', '')
MIRROR = os.path.join(_REFS, 'Scene-Graph-Benchmark.pytorch', '.git') if _REFS else ''
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


@pytest.fixture(scope='module')
def sgb(tmp_path_factory):
    if not os.path.isdir(MIRROR):
        pytest.skip("GLUONTRAIN_REFERENCES not set: needs SGB's source (docs/testing.md)")
    root = tmp_path_factory.mktemp('sgb')
    for f in FILES:
        src = subprocess.run(['git', '--git-dir', MIRROR, 'show', 'HEAD:maskrcnn_benchmark/' + f],
                             capture_output=True, text=True, check=True).stdout
        src = src.replace('dtype=np.float)', 'dtype=np.float64)').replace(').cuda()', ')')
        path = root / 'maskrcnn_benchmark' / f
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(src)
    for d in [p for p in (root / 'maskrcnn_benchmark').rglob('*') if p.is_dir()] + \
            [root / 'maskrcnn_benchmark']:
        (d / '__init__.py').touch()
    (root / 'maskrcnn_benchmark' / 'layers' / '__init__.py').write_text(LAYERS)
    (root / 'maskrcnn_benchmark' / 'utils' / 'imports.py').write_text('import_file = None\n')
    sys.path.insert(0, str(root))
    import importlib
    names = {'bounding_box': 'structures.bounding_box', 'box_coder': 'modeling.box_coder',
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
    mods = {k: importlib.import_module('maskrcnn_benchmark.' + v) for k, v in names.items()}
    yield mods
    sys.path.remove(str(root))
    for k in [k for k in sys.modules if k.startswith('maskrcnn_benchmark')]:
        del sys.modules[k]


def _boxes(n, g, w=200, h=150):
    xy = torch.rand(n, 2, generator=g) * torch.tensor([w * .7, h * .7])
    wh = torch.rand(n, 2, generator=g) * torch.tensor([w * .4, h * .4]) + 2
    return torch.cat([xy, (xy + wh).clamp(max=torch.tensor([w - 1., h - 1.]))], 1)


def _both(sgb, b, size, **fields):
    a, s = BoxList(b.clone(), size), sgb['bounding_box'].BoxList(b.clone(), size)
    for k, v in fields.items():
        a.add_field(k, v.clone())
        s.add_field(k, v.clone())
    return a, s


def test_box_coder_and_anchors(sgb):
    g = torch.Generator().manual_seed(0)
    p, t, codes = _boxes(500, g), _boxes(500, g), torch.randn(500, 8, generator=g)
    for w in [(10., 10., 5., 5.), (1., 1., 1., 1.)]:
        ref = sgb['box_coder'].BoxCoder(w)
        assert torch.allclose(ref.encode(t, p), BoxCoder(w).encode(t, p), atol=1e-4)
        assert torch.allclose(ref.decode(codes, p), BoxCoder(w).decode(codes, p), atol=1e-4)
    ratios = (0.23232838, 0.63365731, 1.28478321, 3.15089189)  # SGB's VG configs
    for s, z in zip((4, 8, 16, 32, 64), (32, 64, 128, 256, 512)):
        ref = sgb['anchor_generator'].generate_anchors(s, (z,), ratios).float()
        assert torch.equal(ref, generate_anchors(s, (z,), ratios))


def test_gtbox_relsample(sgb):
    ref_cls = sgb['rel_sampling'].RelationSampling
    for seed in range(20):
        n = 3 + seed % 7
        g = torch.Generator().manual_seed(seed)
        rel = (torch.rand(n, n, generator=g) < 0.3).long() * torch.randint(1, 5, (n, n),
                                                                           generator=g)
        rel.fill_diagonal_(0)
        a, s = _both(sgb, _boxes(n, g), (200, 150))
        a.add_field('relation', rel, is_triplet=True)
        s.add_field('relation', rel, is_triplet=True)
        for batch in (4, 8, 64):
            torch.manual_seed(seed)
            want = ref_cls(0.5, True, 4, batch, 0.25, True, True).gtbox_relsample([s], [s])
            torch.manual_seed(seed)
            got = RelationSampling(0.5, True, 4, batch, 0.25, True, True).gtbox_relsample(
                [a], [a])
            for k in (1, 2, 3):
                assert torch.equal(want[k][0], got[k][0])


def test_detect_relsample_and_test_pairs(sgb):
    ref_cls = sgb['rel_sampling'].RelationSampling
    for seed in range(20):
        g = torch.Generator().manual_seed(100 + seed)
        nt = 3 + seed % 4
        tb, tl = _boxes(nt, g), torch.randint(1, 4, (nt,), generator=g)
        rel = (torch.rand(nt, nt, generator=g) < 0.5).long() * torch.randint(1, 5, (nt, nt),
                                                                             generator=g)
        rel.fill_diagonal_(0)
        pb = torch.cat([tb.repeat(3, 1) + torch.randn(3 * nt, 4, generator=g) * 3,
                        _boxes(5, g)]).clamp(min=0)
        pb[:, 2:] = torch.max(pb[:, 2:], pb[:, :2] + 1)
        pl = torch.cat([tl.repeat(3), torch.randint(0, 4, (5,), generator=g)])
        pl[torch.rand(len(pl), generator=g) < 0.2] = 0
        ta, ts = _both(sgb, tb, (200, 150), labels=tl)
        ta.add_field('relation', rel, is_triplet=True)
        ts.add_field('relation', rel, is_triplet=True)
        pa, ps = _both(sgb, pb, (200, 150), labels=pl)
        for overlap, per_gt in ((True, 4), (False, 2), (False, 1)):
            torch.manual_seed(seed)
            np.random.seed(seed)
            want = ref_cls(0.5, overlap, per_gt, 16, 0.25, False, True).detect_relsample(
                [ps], [ts])
            torch.manual_seed(seed)
            np.random.seed(seed)
            got = RelationSampling(0.5, overlap, per_gt, 16, 0.25, False, True).detect_relsample(
                [pa], [ta])
            for k in (1, 2, 3):
                assert torch.equal(want[k][0], got[k][0])
        want = ref_cls(0.5, True, 4, 16, 0.25, False, True).prepare_test_pairs('cpu', [ps])
        got = RelationSampling(0.5, True, 4, 16, 0.25, False, True).prepare_test_pairs('cpu', [pa])
        assert torch.equal(want[0], got[0])


def test_relation_post_processor_and_loss(sgb):
    g = torch.Generator().manual_seed(1)
    for use_gt in (True, False):
        n, k = 6, 12
        b = _boxes(n, g)
        per_cls = b[:, None].repeat(1, 5, 1) + torch.randn(n, 5, 4, generator=g)
        ol, rl = torch.randn(n, 5, generator=g), torch.randn(k, 4, generator=g)
        pairs = torch.randint(0, n, (k, 2), generator=g)
        a, s = _both(sgb, b, (200, 150), boxes_per_cls=per_cls)
        want = sgb['rel_inference'].PostProcessor(False, use_gt, 0.3)(([rl], [ol]), [pairs], [s])[0]
        got = PostProcessor(use_gt, 0.3)(([rl], [ol]), [pairs], [a])[0]
        for f in ('pred_labels', 'pred_scores', 'rel_pair_idxs', 'pred_rel_scores',
                  'pred_rel_labels'):
            assert torch.equal(want.get_field(f), got.get_field(f))
        assert torch.equal(want.bbox, got.bbox)
    pa, ps = _both(sgb, _boxes(5, g), (200, 150), labels=torch.randint(0, 5, (5,), generator=g))
    rl, ol = [torch.randn(7, 4, generator=g)], [torch.randn(5, 5, generator=g)]
    lab = [torch.randint(0, 4, (7,), generator=g)]
    for smooth in (False, True):
        want = sgb['rel_loss'].RelationLossComputation(False, 0, 0, False, 0, smooth, [0.1] * 3)(
            [ps], lab, rl, ol)
        got = RelationLossComputation(smooth)([pa], lab, rl, ol)
        assert all(torch.equal(x, y) for x, y in zip(want, got))


def test_box_post_processor(sgb):
    g = torch.Generator().manual_seed(2)
    for dup in (True, False):
        n, c = 40, 6
        b = _boxes(n, g)
        logits = torch.randn(n, c, generator=g) * 2
        reg = torch.randn(n, 4 * c, generator=g) * 0.5
        feats = torch.randn(n, 3, generator=g)
        a, s = _both(sgb, b, (200, 150), labels=torch.randint(0, c, (n,), generator=g),
                     predict_logits=logits, attributes=torch.zeros(n, 2, dtype=torch.long))
        x1, (r1,) = sgb['box_inference'].PostProcessor(0.05, 0.3, 300, dup, 10)(
            (feats, logits, reg), [s], relation_mode=True)
        x2, (r2,) = BoxPostProcessor(0.05, 0.3, 300, dup, 10)((feats, logits, reg), [a],
                                                               relation_mode=True)
        assert len(r1) == len(r2) > 0
        o1 = r1.get_field('pred_scores').sort(descending=True)[1]
        o2 = r2.get_field('pred_scores').sort(descending=True)[1]
        assert torch.allclose(r1.bbox[o1], r2.bbox[o2], atol=1e-4)
        assert torch.equal(x1[o1], x2[o2])
        for f in ('pred_labels', 'labels', 'predict_logits'):
            assert torch.equal(r1.get_field(f)[o1], r2.get_field(f)[o2])


def test_box_sampler_and_loss(sgb):
    g = torch.Generator().manual_seed(3)
    cfg = tiny_cfg(relation_on=False)
    cfg.MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE = 16
    tb, tl = _boxes(4, g), torch.randint(1, 6, (4,), generator=g)
    pb = torch.cat([tb.repeat(4, 1) + torch.randn(16, 4, generator=g) * 6,
                    _boxes(30, g)]).clamp(min=0)
    pb[:, 2:] = torch.max(pb[:, 2:], pb[:, :2] + 1)
    ta, ts = _both(sgb, tb, (200, 150), labels=tl, attributes=torch.zeros(4, 2, dtype=torch.long))
    pa, ps = _both(sgb, pb, (200, 150))
    ref = sgb['box_sampling'].FastRCNNSampling(
        sgb['matcher'].Matcher(0.5, 0.3, False),
        sgb['sampler'].BalancedPositiveNegativeSampler(16, 0.25),
        sgb['box_coder'].BoxCoder((10., 10., 5., 5.)))
    torch.manual_seed(5)
    want = ref.subsample([ps], [ts])
    torch.manual_seed(5)
    got = BoxSampler(cfg).subsample([pa], [ta])
    assert torch.equal(want[0].bbox, got[0].bbox)
    logits = torch.randn(len(got[0]), 6, generator=g)
    reg = torch.randn(len(got[0]), 24, generator=g)
    l1 = sgb['box_loss'].FastRCNNLossComputation()([logits], [reg], want)
    l2 = box_loss(logits, reg, got)
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(l1, l2))


@pytest.mark.filterwarnings('ignore:indexing with dtype torch.uint8')
def test_rpn_proposals_and_loss(sgb):
    g = torch.Generator().manual_seed(4)
    cfg = tiny_cfg('sgdet', relation_on=False)
    rpn = RPNModule(cfg, 16)
    feats = [torch.randn(2, 16, 128 // s, 128 // s, generator=g) for s in (4, 8, 16, 32, 64)]
    obj, reg = rpn.head(feats)
    anchors = rpn.anchors([(128, 128), (100, 120)], feats)
    sbox = sgb['bounding_box'].BoxList
    s_anchors = []
    for per_image in anchors:
        levels = []
        for a in per_image:
            s = sbox(a.bbox, a.size)
            s.add_field('visibility', a.get_field('visibility'))
            levels.append(s)
        s_anchors.append(levels)
    r = cfg.MODEL.RPN
    for training in (True, False):
        rpn.train(training)
        ref = sgb['rpn_inference'].RPNPostProcessor(
            r.PRE_NMS_TOP_N_TRAIN if training else r.PRE_NMS_TOP_N_TEST,
            r.POST_NMS_TOP_N_TRAIN if training else r.POST_NMS_TOP_N_TEST, r.NMS_THRESH,
            r.MIN_SIZE, sgb['box_coder'].BoxCoder((1., 1., 1., 1.)),
            r.FPN_POST_NMS_TOP_N_TRAIN if training else r.FPN_POST_NMS_TOP_N_TEST,
            r.FPN_POST_NMS_PER_BATCH, False)
        ref.train(training)
        with torch.no_grad():
            want, got = ref(s_anchors, obj, reg), rpn.select(anchors, obj, reg)
        for x, y in zip(want, got):
            assert torch.equal(x.bbox, y.bbox)
            assert torch.equal(x.get_field('objectness'), y.get_field('objectness'))
    tb = _boxes(3, g, 120, 100)
    ref = sgb['rpn_loss'].RPNLossComputation(
        sgb['matcher'].Matcher(0.7, 0.3, True),
        sgb['sampler'].BalancedPositiveNegativeSampler(256, 0.5),
        sgb['box_coder'].BoxCoder((1., 1., 1., 1.)), sgb['rpn_loss'].generate_rpn_labels)
    torch.manual_seed(3)
    want = ref(s_anchors, obj, reg, [sbox(tb, (128, 128)), sbox(tb, (120, 100))])
    rpn.train()
    torch.manual_seed(3)
    got = rpn.loss(anchors, obj, reg, [BoxList(tb, (128, 128)), BoxList(tb, (120, 100))])
    assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(want, got))


def test_load_mapping(sgb):
    keys = ['backbone.body.mod1.conv1.weight', 'roi_heads.box.feature_extractor.fc6.weight',
            'roi_heads.relation.box_feature_extractor.fc6.weight',
            'roi_heads.relation.union_feature_extractor.feature_extractor.fc7.bias',
            'roi_heads.relation.union_feature_extractor.rect_conv.0.weight',
            'roi_heads.relation.predictor.x']
    loaded = collections.OrderedDict(
        (k, torch.tensor([float(i)])) for i, k in enumerate(
            ['conv1.weight', 'body.mod1.conv1.weight',
             'roi_heads.box.feature_extractor.fc6.weight', 'fc7.bias',
             'roi_heads.box.feature_extractor.fc7.bias', 'x']))
    want = collections.OrderedDict((k, torch.tensor([-1.])) for k in keys)
    got = copy.deepcopy(want)
    sgb['model_serialization'].align_and_update_state_dicts(want, loaded,
                                                            dict(RELATION_LOAD_MAPPING))
    align_and_update_state_dicts(got, loaded, RELATION_LOAD_MAPPING)
    assert all(torch.equal(want[k], got[k]) for k in keys)
