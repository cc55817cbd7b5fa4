"""SSD pictures: detections scaled to the raw image, the samples grid, the phase restored."""
import numpy as np
import pytest
import torch

from gluontrain.data import synthetic
from gluontrain.torch.ssd.detection import detections_in_pixels
from gluontrain.torch.ssd.plots import detect, draw_val_samples, val_samples_hook


class _FixedSSD(torch.nn.Module):
    """Test phase returns one detection: class row 8 (VOC 'cat'), score 0.9, box
    (0.1, 0.2, 0.5, 0.6) in [0, 1]; it records the input it saw."""

    def __init__(self):
        super().__init__()
        self.phase, self.num_classes, self.detect = 'train', 21, None
        self.seen = []

    def forward(self, x):
        assert self.phase == 'test' and not self.training and not torch.is_grad_enabled()
        self.seen.append(x)
        out = torch.zeros(x.shape[0], 21, 200, 5)
        out[:, 8, 0] = torch.tensor([0.9, 0.1, 0.2, 0.5, 0.6])
        return out


def test_detections_in_pixels_by_hand():
    dets = np.zeros((3, 4, 5), np.float32)
    dets[0, 0] = [0.99, 0, 0, 1, 1]        # background row: never reported
    dets[1, 0] = [0.5, 0.1, 0.2, 0.3, 0.4]
    dets[2, 0] = [0.7, 0.0, 0.0, 0.5, 0.5]
    dets[2, 1] = [0.2, 0.5, 0.5, 1.0, 1.0]
    labels, scores, boxes = detections_in_pixels(dets, 200, 100)
    assert labels.tolist() == [0, 1, 1]
    assert scores.tolist() == pytest.approx([0.5, 0.7, 0.2])
    np.testing.assert_allclose(boxes, [[20, 20, 60, 40], [0, 0, 100, 50],
                                       [100, 50, 200, 100]], rtol=1e-6)


def test_detect_scales_to_the_raw_image_and_restores_the_phase():
    net = _FixedSSD()
    img = np.full((120, 240, 3), 104, np.uint8)  # BGR; blue channel equals MEANS[0]
    labels, scores, boxes = detect(net, img, torch.device('cpu'))
    assert labels.tolist() == [7] and scores.tolist() == pytest.approx([0.9])
    np.testing.assert_allclose(boxes, [[24, 24, 120, 72]], rtol=1e-6)
    x = net.seen[0]
    assert x.shape == (1, 3, 300, 300)
    # channels RGB-ordered after mean subtraction: the last one is blue - 104 = 0
    assert float(x[0, 2].abs().max()) == 0.0 and float(x[0, 0].abs().max()) > 0
    assert net.phase == 'train' and net.training


def test_val_samples_picture(tmp_path):
    from PIL import Image
    from gluontrain.core.loop import TrainState
    from gluontrain.torch.data import VOCEvalDataset
    root = synthetic.write_voc(str(tmp_path / 'voc'), num_train=2, num_val=5, seed=1,
                               classes=synthetic.DEFAULT_VOC_CLASSES, image_size=(96, 128))
    ds = VOCEvalDataset(root)
    path = draw_val_samples(_FixedSSD(), ds, str(tmp_path / 's.png'), torch.device('cpu'),
                            num=4, thresh=0.5)
    with Image.open(path) as im:
        assert im.size == (800, 800)
    hook_path = tmp_path / 'hook.png'
    hook = val_samples_hook(_FixedSSD(), ds, str(hook_path), torch.device('cpu'), num=1)
    hook.after_epoch(TrainState())
    assert not hook_path.exists()  # no validation this epoch
    hook.after_train(TrainState(scores={'val': (['mAP'], [0.1])}))
    with Image.open(hook_path) as im:
        assert im.size == (400, 400)


def test_validation_keeps_the_pictured_detections_and_the_picture_reuses_them(tmp_path):
    from gluontrain.core.voc_eval import VOCEvaluator
    from gluontrain.torch.data import VOCEvalDataset
    from gluontrain.torch.ssd.augmentations import BaseTransform
    from gluontrain.torch.ssd.config import MEANS
    from gluontrain.torch.ssd.recipe import validate
    from gluontrain.torch.batchify import Pad, Stack, Tuple
    from gluontrain.data.images import read_bgr
    root = synthetic.write_voc(str(tmp_path / 'voc'), num_train=2, num_val=5, seed=1,
                               classes=synthetic.DEFAULT_VOC_CLASSES, image_size=(96, 128))
    ds = VOCEvalDataset(root, transform=BaseTransform(300, MEANS))
    loader = torch.utils.data.DataLoader(ds, batch_size=2, collate_fn=Tuple(
        Stack(), Pad(pad_val=-1), Stack()))
    net = _FixedSSD()
    kept = {1: 'stale', 3: None, 7: None}  # 7: no such image
    validate(net, loader, [torch.device('cpu')], VOCEvaluator(ds.classes), detections_of=kept)
    assert kept[7] is None and len(net.seen) == 3  # three batches: 2, 2 and 1 images
    for i in (1, 3):
        base, image_id = ds.ids[i]
        img = read_bgr('{}/JPEGImages/{}.jpg'.format(base, image_id))
        want = detect(_FixedSSD(), img, torch.device('cpu'))
        for got, expected in zip(kept[i], want):
            np.testing.assert_allclose(got, expected, rtol=1e-6)
    # the picture of images 0..3 runs the net only for the two validation did not keep
    net.seen.clear()
    draw_val_samples(net, ds, str(tmp_path / 's.png'), torch.device('cpu'), num=4,
                     detections=kept)
    assert len(net.seen) == 2
