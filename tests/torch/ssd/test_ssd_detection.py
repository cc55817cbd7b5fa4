"""Detect: output layout and equality with the reference's per-image, per-class loop."""
import pytest
import torch

from gluontrain.torch.ssd import config
import numpy as np

from gluontrain.torch.ssd.detection import Detect, detections_in_pixels, results_file_values
from gluontrain.torch.ssd.prior_box import PriorBox
from ssd_reference_loops import reference_nms


def reference_detect(loc, conf, priors, num_classes, top_k, conf_thresh, nms_thresh):
    """The reference's Detect.forward loop (its final top-k step is a no-op, omitted)."""
    num = loc.size(0)
    output = torch.zeros(num, num_classes, top_k, 5)
    conf_preds = conf.view(num, priors.size(0), num_classes).transpose(2, 1)
    for i in range(num):
        p, l = priors, loc[i]
        boxes = torch.cat((p[:, :2] + l[:, :2] * 0.1 * p[:, 2:],
                           p[:, 2:] * torch.exp(l[:, 2:] * 0.2)), 1)
        boxes[:, :2] -= boxes[:, 2:] / 2
        boxes[:, 2:] += boxes[:, :2]
        for cl in range(1, num_classes):
            mask = conf_preds[i, cl].gt(conf_thresh)
            scores = conf_preds[i, cl][mask]
            if scores.size(0) == 0:
                continue
            cand = boxes[mask]
            ids, count = reference_nms(cand, scores, nms_thresh, top_k)
            output[i, cl, :count] = torch.cat((scores[ids[:count]].unsqueeze(1),
                                               cand[ids[:count]]), 1)
    return output


@pytest.fixture(scope='module')
def priors():
    return PriorBox(config.voc).forward()


def predictions(seed, batch, num_classes, num_priors=8732):
    gen = torch.Generator().manual_seed(seed)
    loc = torch.randn(batch, num_priors, 4, generator=gen) * 0.5
    conf = torch.softmax(torch.randn(batch, num_priors, num_classes, generator=gen) * 3, -1)
    return loc, conf


def test_layout_and_equality_with_reference_loop(priors):
    loc, conf = predictions(0, 2, 4)
    out = Detect(4, 0, 200, 0.01, 0.45)(loc, conf, priors)
    assert out.shape == (2, 4, 200, 5)
    assert out[:, 0].eq(0).all()  # background
    scores = out[..., 0]
    assert (scores[..., 1:] <= scores[..., :-1]).all()  # descending within a class
    assert scores[:, 1:, 0].gt(0.01).all()  # every class found something here
    assert torch.equal(out, reference_detect(loc, conf, priors, 4, 200, 0.01, 0.45))


def test_sparse_classes_small_top_k_and_flat_inputs(priors):
    loc, conf = predictions(1, 3, 5)
    conf[1, :, 2] = 0.0  # a class without any candidate in image 1
    det = Detect(5, 0, 7, 0.3, 0.45)
    out = det(loc, conf, priors)
    ref = reference_detect(loc, conf, priors, 5, 7, 0.3, 0.45)
    assert torch.equal(out, ref)
    assert out[1, 2].eq(0).all()
    # the reference's flat layouts: loc (B, P*4), conf (B*P, C)
    flat = det(loc.reshape(3, -1), conf.reshape(-1, 5), priors)
    assert torch.equal(flat, out)


def test_tied_scores_follow_reference_order(priors):
    loc = torch.zeros(1, 8732, 4)
    conf = torch.full((1, 8732, 2), 0.5)  # every prior ties at 0.5
    out = Detect(2, 0, 200, 0.01, 0.45)(loc, conf, priors)
    assert torch.equal(out, reference_detect(loc, conf, priors, 2, 200, 0.01, 0.45))
    # among equal scores the largest prior index is taken first: the 1x1 map's last box
    last = priors[-1]
    assert torch.allclose(out[0, 1, 0, 1:], torch.cat([last[:2] - last[2:] / 2,
                                                       last[:2] + last[2:] / 2]), atol=1e-6)


def test_rejects_non_positive_nms_threshold():
    with pytest.raises(ValueError):
        Detect(21, 0, 200, 0.01, 0.0)


def test_detections_as_eval_py_writes_and_reads_them():
    # eval.py: boxes scaled in float32, '{:.3f}' score, '{:.1f}' of box + 1, read back
    dets = np.zeros((3, 2, 5), np.float32)
    dets[1, 0] = [0.12345, 0.1, 0.2, 0.3, 0.4]
    dets[2, 1] = [0.0005, 0.5, 0.25, 0.75, 1.0]
    labels, scores, boxes = detections_in_pixels(dets, 101, 50)
    assert labels.tolist() == [0, 1] and boxes.dtype == np.float32
    np.testing.assert_array_equal(boxes[1], np.float32([0.5, 0.25, 0.75, 1.0]) *
                                  np.float32([101, 50, 101, 50]))
    file_scores, file_boxes = results_file_values(scores, boxes)
    assert file_scores.tolist() == [0.123, 0.001]  # '%.3f': 0.0005 (float32 above it) -> 0.001
    # 0.1 * 101 = 10.1 in float32 -> 11.1; 12.5 (exact) + 1 -> '13.5'; 0.25 * 50 + 1 = 13.5
    assert file_boxes.tolist() == [[11.1, 11.0, 31.3, 21.0], [51.5, 13.5, 76.8, 51.0]]
    empty = results_file_values(np.zeros(0), np.zeros((0, 4)))
    assert empty[0].shape == (0,) and empty[1].shape == (0, 4)
