"""Scene-graph pictures: which triplets are drawn, their hit colours, the PNG written."""
import os
import sys

import numpy as np
import pytest
import torch

from gluontrain.torch.sgg.plots import (GRAPH_CELL, GRAPH_DPI, draw_scene_graphs,
                                        ground_truth_triplets, predicted_triplets,
                                        samples_from_dataset, validation_graphs_path,
                                        write_validation_graphs)
from gluontrain.torch.twostage.structures import BoxList

sys.path.insert(0, os.path.join(os.path.dirname(__file__), 'evaluation'))
from sgg_eval_support import CLASSES, PREDICATES, FakeVG, make_prediction  # noqa: E402

GT = {'width': 40, 'height': 20, 'labels': [1, 4], 'boxes': [[0, 0, 9, 9], [20, 0, 29, 9]],
      'rels': [[0, 1, 3], [0, 1, 3]]}


def sgdet_prediction():
    """Pair (0,1) man-near-tree with a man box overlapping 0.45 (miss), pair (2,1) with
    0.5 exactly (hit), pair (1,0) tree-on-man (miss)."""
    return make_prediction([[0, 0, 8, 4], [20, 0, 29, 9], [0, 0, 9, 4]], (40, 20), [1, 4, 1],
                           [.9, .8, .7], [[0, 1], [2, 1], [1, 0]],
                           [[0, 0, 0, .9, .1], [0, 0, 0, .8, .2], [0, .6, 0, .4, 0]])


def test_predicted_and_ground_truth_triplets():
    pred = sgdet_prediction()
    assert predicted_triplets(pred, top_k=2) == [(0, 1, 3, pytest.approx(.9)),
                                                 (2, 1, 3, pytest.approx(.8))]
    pred.extra_fields.pop('pred_rel_labels')
    assert [t[2] for t in predicted_triplets(pred)] == [3, 3, 1]
    gt = FakeVG([GT]).get_groundtruth(0, evaluation=True)
    assert ground_truth_triplets(gt) == [(0, 1, 3, 1.0)]     # the duplicate row once
    train_target = BoxList(gt.bbox, gt.size)
    train_target.add_field('labels', gt.get_field('labels'))
    train_target.add_field('relation', torch.tensor([[0, 3], [2, 0]]), is_triplet=True)
    assert ground_truth_triplets(train_target) == [(0, 1, 3, 1.0), (1, 0, 2, 1.0)]


def colour_pixels(png, rgb, tol=30):
    import matplotlib.image as mpimg
    img = (mpimg.imread(png)[..., :3] * 255).astype(int)
    return int((np.abs(img - np.array(rgb)).max(-1) < tol).sum()), img.shape


def test_picture_size_and_hit_colours(tmp_path):
    gt = FakeVG([GT]).get_groundtruth(0, evaluation=True)
    image = np.zeros((20, 40, 3), np.uint8)
    # the prediction in a 2x input size: resized to the image before drawing and matching
    path = write_validation_graphs(str(tmp_path), 300, [(image, gt,
                                                         sgdet_prediction().resize((80, 40)))],
                                   CLASSES, PREDICATES, top_k=3)
    assert path == validation_graphs_path(str(tmp_path), 300)
    assert path.endswith(os.path.join('scene_graphs', 'iter_0000300.png'))
    assert os.listdir(tmp_path / 'scene_graphs') == ['iter_0000300.png']
    green, shape = colour_pixels(path, (44, 160, 44))
    red, _ = colour_pixels(path, (214, 39, 40))
    cyan, _ = colour_pixels(path, (23, 190, 207))
    assert shape[:2] == (int(GRAPH_CELL * GRAPH_DPI), int(2 * GRAPH_CELL * GRAPH_DPI))
    assert green > 0 and red > 0 and cyan > 0
    # only misses: no green at all
    miss_only = make_prediction([[0, 0, 8, 4], [20, 0, 29, 9]], (40, 20), [1, 4], [.9, .8],
                                [[0, 1]], [[0, 0, 0, .9, .1]])
    path = draw_scene_graphs([(image, gt, miss_only)] * 2, CLASSES, PREDICATES,
                             str(tmp_path / 'b.png'), title='two rows')
    green, shape = colour_pixels(path, (44, 160, 44))
    assert green == 0 and shape[0] == int(2 * GRAPH_CELL * GRAPH_DPI)
    with pytest.raises(ValueError, match='no sample'):
        draw_scene_graphs([], CLASSES, PREDICATES, str(tmp_path / 'c.png'))


def test_samples_from_dataset_reads_the_image_files(tmp_path):
    from PIL import Image
    ds = FakeVG([GT, GT])
    ds.filenames = []
    for i in range(2):
        f = str(tmp_path / 'im{}.jpg'.format(i))
        Image.new('RGB', (40, 20), (10 * i, 0, 0)).save(f)
        ds.filenames.append(f)
    preds = [sgdet_prediction(), sgdet_prediction()]
    samples = samples_from_dataset(ds, preds, max_images=1)
    assert len(samples) == 1 and samples[0][0].shape == (20, 40, 3)
    assert samples[0][1].get_field('relation_tuple').shape == (2, 3)
    assert samples_from_dataset(ds, preds, indices=[1])[0][2] is preds[1]


class TinyVG(FakeVG):
    """FakeVG with image files and ``__getitem__`` as VGDataset's test split."""

    def __init__(self, folder):
        from PIL import Image
        super().__init__([GT, GT])
        self.filenames = []
        for i in range(2):
            f = os.path.join(folder, 'im{}.jpg'.format(i))
            Image.new('RGB', (40, 20), (0, 0, 40 * i)).save(f)
            self.filenames.append(f)

    def __getitem__(self, i):
        gt = self.get_groundtruth(i)
        return torch.zeros(3, 40, 80), gt.resize((80, 40)), i


class EchoModel(torch.nn.Module):
    """Predicts the SGDet case above in the input size; records its calls."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)
        self.calls = []

    def forward(self, images, targets):
        shape = images.tensors.shape if hasattr(images, "tensors") else images.shape
        self.calls.append((self.training, tuple(shape), targets[0].size))
        torch.rand(1)    # draws from the global generator: the hook must put it back
        return [sgdet_prediction().resize(targets[0].size)]


def test_hook_draws_once_per_validation_and_restores_model_and_rng(tmp_path):
    from yacs.config import CfgNode as CN
    from gluontrain.core.loop import TrainState
    from gluontrain.torch.sgg.plots import val_samples_hook
    cfg = CN({'DATALOADER': CN({'SIZE_DIVISIBILITY': 0})})
    model, ds = EchoModel(), TinyVG(str(tmp_path))
    path = str(tmp_path / 'run_val_samples.png')
    hook = val_samples_hook(cfg, model, ds, path, torch.device('cpu'), num_images=1,
                            batch_fn=lambda imgs, div: torch.stack(imgs))
    state = TrainState()
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    for it, validated in ((99, False), (100, True), (101, False), (200, True)):
        state.iteration = it
        if validated:
            state.scores['val'], state.val_iteration = (['R@100'], [0.5]), it
        hook.after_batch(state)
    hook.after_train(state)
    assert torch.rand(1) == expected
    assert model.training and model.calls == [(False, (1, 3, 40, 80), (80, 40))] * 2
    assert sorted(os.listdir(tmp_path / 'scene_graphs')) == ['iter_0000100.png',
                                                             'iter_0000200.png']
    assert open(path, 'rb').read() == (tmp_path / 'scene_graphs' / 'iter_0000200.png').read_bytes()
    assert val_samples_hook(cfg, model, None, path, torch.device('cpu')) is None


def test_a_failing_picture_only_warns():
    from gluontrain.core.loop import TrainState
    from gluontrain.torch.sgg.plots import SceneGraphSamplesHook

    def fail(iteration):
        raise OSError('disk full at {}'.format(iteration))
    hook, state = SceneGraphSamplesHook(fail), TrainState()
    state.scores['val'], state.val_iteration, state.iteration = (['R@100'], [0.1]), 5, 5
    with pytest.warns(UserWarning, match='disk full at 5'):
        hook.after_epoch(state)


def test_default_batching_is_sgg_datas_image_list(tmp_path):
    """With sgg-data merged: the default batch_fn pads into an ImageList as the loader does
    (both use gluontrain.torch.twostage.images)."""
    collate = pytest.importorskip('gluontrain.torch.twostage.images')
    from gluontrain.torch.sgg.plots import predict_samples
    model, ds = EchoModel(), TinyVG(str(tmp_path))
    samples = predict_samples(model, ds, [1], torch.device('cpu'), size_divisible=32)
    assert model.calls == [(False, (1, 3, 64, 96), (80, 40))]
    assert samples[0][0].shape == (20, 40, 3) and collate.ImageList is not None
