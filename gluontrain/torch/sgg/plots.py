"""Scene-graph pictures: predicted triplets on a validation image next to the ground truth.

One row of two panels per image. Left: the top-K predicted triplets, best first (boxes with
their class, an arrow subject -> object, the predicate and its score a third of the way along
it), green when the triplet hits a ground-truth one (SGB's matching: same classes and
predicate, both boxes IoU >= 0.5 with ``+1``), red otherwise. Right: the ground-truth graph
(cyan). Drawn as :mod:`gluontrain.core.plots` draws (Agg canvas, staged PNG writes).
"""
import os
import shutil
import warnings

import numpy as np

from ...core.checkpoint import atomic_save_file
from ...core.loop import Hook
from ...core.plots import class_name, new_figure, save_png
from .evaluation.sgg_eval import compute_pred_matches, triplet, to_numpy as _np
from .inference import compute_on_dataset

__all__ = ['GRAPH_CELL', 'GRAPH_DPI', 'predicted_triplets', 'ground_truth_triplets',
           'draw_scene_graph', 'draw_scene_graphs', 'samples_from_dataset',
           'validation_graphs_path', 'write_validation_graphs', 'predict_samples',
           'SceneGraphSamplesHook', 'val_samples_hook']

# inches per panel and dots per inch: each image row is 2 * GRAPH_CELL by GRAPH_CELL inches
GRAPH_CELL = 4.0
GRAPH_DPI = 100
HIT, MISS, GT = 'tab:green', 'tab:red', 'tab:cyan'


def _fit(boxlist, width, height):
    return boxlist if tuple(boxlist.size) == (width, height) else boxlist.resize((width, height))


def predicted_triplets(prediction, top_k=10):
    """``(subject box, object box, predicate, score)`` of the first ``top_k`` relations of a
    prediction ``BoxList`` (``pred_rel_labels``, else the best non-background predicate, as
    SGB's evaluation)."""
    pairs = _np(prediction.get_field('rel_pair_idxs')).astype(np.int64).reshape(-1, 2)[:top_k]
    scores = _np(prediction.get_field('pred_rel_scores'))[:top_k]
    if prediction.has_field('pred_rel_labels'):
        labels = _np(prediction.get_field('pred_rel_labels')).astype(np.int64)[:top_k]
    else:
        labels = 1 + scores[:, 1:].argmax(1) if len(scores) else np.zeros(0, np.int64)
    return [(int(s), int(o), int(p), float(scores[i, p]))
            for i, ((s, o), p) in enumerate(zip(pairs, labels))]


def ground_truth_triplets(groundtruth):
    """``(subject box, object box, predicate, 1.0)`` of each ground-truth relation, duplicate
    rows once (``relation_tuple``, or the ``relation`` matrix of a training target)."""
    if groundtruth.has_field('relation_tuple'):
        rels = _np(groundtruth.get_field('relation_tuple')).astype(np.int64).reshape(-1, 3)
    else:
        mat = _np(groundtruth.get_field('relation'))
        rels = np.column_stack(np.nonzero(mat) + (mat[np.nonzero(mat)],)).astype(np.int64)
    return [t + (1.0,) for t in dict.fromkeys(map(tuple, rels.tolist()))]


def _hits(groundtruth, prediction, triplets):
    """Whether each drawn predicted triplet matches a ground-truth triplet (the prediction's
    own boxes and ``pred_labels``: in PredCls they are the ground truth's, as SGB uses)."""
    gt_rels = np.asarray([t[:3] for t in ground_truth_triplets(groundtruth)], np.int64)
    gt_t, gt_b = triplet(gt_rels, _np(groundtruth.get_field('labels'), np.int64),
                          _np(groundtruth.convert('xyxy').bbox))
    pr_t, pr_b = triplet(np.asarray([t[:3] for t in triplets], np.int64),
                          _np(prediction.get_field('pred_labels'), np.int64),
                          _np(prediction.convert('xyxy').bbox))
    return [bool(m) for m in compute_pred_matches(gt_t, pr_t, gt_b, pr_b, 0.5)]


def draw_scene_graph(ax, image, boxes, labels, triplets, classes, predicates, colors):
    """Boxes, class names, arrows subject -> object and predicate texts on matplotlib axes.

    ``boxes`` ``(N, 4)`` ``x0, y0, x1, y1`` in the image's pixels, ``labels`` ``(N,)`` class
    ids; ``triplets`` ``(subject, object, predicate, score)`` (a score of 1.0 is not printed),
    each drawn in its entry of ``colors``.
    """
    from matplotlib.patches import Rectangle  # pylint: disable=import-outside-toplevel
    ax.imshow(image)
    drawn = {}
    for (s, o, p, score), color in zip(triplets, colors):
        for b in (s, o):
            if b not in drawn:
                x0, y0, x1, y1 = boxes[b]
                drawn[b] = ((x0 + x1) / 2.0, (y0 + y1) / 2.0)
                ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False,
                                       edgecolor=color, linewidth=1.2))
                ax.text(x0, y0, '{}:{}'.format(b, class_name(classes, int(labels[b]))),
                        fontsize=6, color='white', va='bottom',
                        bbox={'facecolor': color, 'alpha': 0.7, 'pad': 1, 'edgecolor': 'none'})
        (xs, ys), (xo, yo) = drawn[s], drawn[o]
        ax.annotate('', xy=(xo, yo), xytext=(xs, ys),
                    arrowprops={'arrowstyle': '->', 'color': color, 'linewidth': 1.2})
        text = class_name(predicates, p) + ('' if score == 1.0 else ' {:.2f}'.format(score))
        # a third of the way from the subject: the texts of (a, b) and (b, a) do not overlap
        ax.text(xs + (xo - xs) / 3.0, ys + (yo - ys) / 3.0, text, fontsize=6, color='black',
                ha='center', va='center',
                bbox={'facecolor': 'white', 'alpha': 0.8, 'pad': 1, 'edgecolor': color})
    ax.set(xlim=(0, image.shape[1]), ylim=(image.shape[0], 0))
    ax.axis('off')


def draw_scene_graphs(samples, classes, predicates, path, top_k=10, title=None):
    """One row per image, predicted top-K triplets | ground-truth graph, saved as the PNG
    ``path`` (returned).

    ``samples``: ``(image, groundtruth, prediction)``, ``image`` HxWx3 RGB (uint8 or floats in
    [0, 1]), ``groundtruth`` a BoxList with ``labels`` and ``relation_tuple`` (or
    ``relation``), ``prediction`` one with SGB's fields; both resized to the image if needed.
    ``classes`` / ``predicates``: ``ind_to_classes`` / ``ind_to_predicates``.
    """
    if not samples:
        raise ValueError('draw_scene_graphs: no sample to draw')
    fig = new_figure((2 * GRAPH_CELL, GRAPH_CELL * len(samples)), GRAPH_DPI)
    for row, (image, gt, pred) in enumerate(samples):
        image = np.asarray(image)
        height, width = image.shape[:2]
        gt, pred = _fit(gt, width, height), _fit(pred, width, height)
        trip = predicted_triplets(pred, top_k)
        hits = _hits(gt, pred, trip)
        ax = fig.add_subplot(len(samples), 2, 2 * row + 1)
        draw_scene_graph(ax, image, _np(pred.convert('xyxy').bbox),
                         _np(pred.get_field('pred_labels')), trip, classes, predicates,
                         [HIT if h else MISS for h in hits])
        ax.set_title('prediction: top {} triplets, {} hit'.format(len(trip), sum(hits)),
                     fontsize=8)
        gt_trip = ground_truth_triplets(gt)
        ax = fig.add_subplot(len(samples), 2, 2 * row + 2)
        draw_scene_graph(ax, image, _np(gt.convert('xyxy').bbox), _np(gt.get_field('labels')),
                         gt_trip, classes, predicates, [GT] * len(gt_trip))
        ax.set_title('ground truth: {} triplets'.format(len(gt_trip)), fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_png(fig, path)


def samples_from_dataset(dataset, predictions, indices=None, max_images=4):
    """``(image, groundtruth, prediction)`` triples for :func:`draw_scene_graphs` of
    ``indices`` (default the first ``max_images``) of a VGDataset-like ``dataset``
    (``filenames``, ``get_groundtruth``); ``predictions`` indexed by dataset image."""
    from PIL import Image  # pylint: disable=import-outside-toplevel
    indices = range(min(max_images, len(predictions))) if indices is None else indices
    out = []
    for i in indices:
        with Image.open(dataset.filenames[i]) as im:
            image = np.asarray(im.convert('RGB'))
        out.append((image, dataset.get_groundtruth(i, evaluation=True), predictions[i]))
    return out


def validation_graphs_path(folder, iteration):
    """``<folder>/scene_graphs/iter_<iteration:07d>.png`` (one picture per validation)."""
    return os.path.join(folder, 'scene_graphs', 'iter_{:07d}.png'.format(int(iteration)))


def write_validation_graphs(folder, iteration, samples, classes, predicates, top_k=10):
    """Draw one validation's scene graphs to :func:`validation_graphs_path` under the run's
    ``folder`` (staged write); returns the PNG's path. Other arguments as
    :func:`draw_scene_graphs`."""
    return draw_scene_graphs(samples, classes, predicates,
                             validation_graphs_path(folder, iteration), top_k=top_k,
                             title='validation at iteration {}'.format(int(iteration)))


def predict_samples(model, dataset, indices, device, size_divisible=0, batch_fn=None):
    """Run ``model`` in eval mode on dataset images one at a time, as SGB's inference does;
    :func:`samples_from_dataset` of the predictions (mode and every RNG put back).

    ``dataset[i] -> (image tensor, target, i)``; ``size_divisible``:
    ``DATALOADER.SIZE_DIVISIBILITY``; ``batch_fn([tensor], size_divisible) -> images``, default
    :func:`gluontrain.torch.twostage.images.to_image_list`.
    """
    if batch_fn is None:
        from ..twostage.images import to_image_list  # pylint: disable=import-outside-toplevel
        batch_fn = to_image_list
    was_training = model.training
    # one-image batches, read inside compute_on_dataset's preserved RNGs
    batches = ((batch_fn([img], size_divisible), [target], [i])
               for i in indices for img, target, _ in [dataset[i]])
    try:
        predictions = compute_on_dataset(model, batches, device)
    finally:
        model.train(was_training)
    return samples_from_dataset(dataset, predictions, indices=list(indices))


class SceneGraphSamplesHook(Hook):
    """After every validation (``state.val_iteration == state.iteration`` with a ``'val'``
    score, after a batch or an epoch, and at the end of training), call
    ``draw_fn(iteration) -> path``; ``errors`` it raises only warn (a picture must never end
    a run)."""

    def __init__(self, draw_fn, errors=(OSError, ValueError, IndexError, RuntimeError)):
        self.draw_fn, self.errors = draw_fn, tuple(errors)
        self._drawn = None

    def _maybe_draw(self, state):
        if 'val' not in state.scores or getattr(state, 'val_iteration', -1) < 0 \
                or state.val_iteration == self._drawn:
            return
        self._drawn = state.val_iteration
        try:
            self.draw_fn(state.val_iteration)
        except self.errors as e:
            warnings.warn('scene-graph picture not written: {}'.format(e))

    def after_batch(self, state):
        if getattr(state, 'val_iteration', -1) == state.iteration:
            self._maybe_draw(state)

    after_epoch = after_train = _maybe_draw


def val_samples_hook(cfg, model, dataset, path, device, num_images=2, top_k=10,
                     batch_fn=None):
    """The recipe's picture hook (None without a ``dataset``): at every validation ``model``
    on the first ``num_images`` images, drawn by :func:`draw_scene_graphs` to
    ``<dir of path>/scene_graphs/iter_<iteration:07d>.png`` and the latest copied to ``path``
    (``RunPaths.val_samples``). ``cfg``: reads ``DATALOADER.SIZE_DIVISIBILITY``."""
    if dataset is None or len(dataset) == 0:
        return None
    indices = list(range(min(num_images, len(dataset))))
    classes = getattr(dataset, 'ind_to_classes', None)
    predicates = getattr(dataset, 'ind_to_predicates', None)

    def draw(iteration):
        samples = predict_samples(model, dataset, indices, device,
                                  cfg.DATALOADER.SIZE_DIVISIBILITY, batch_fn)
        out = write_validation_graphs(os.path.dirname(os.path.abspath(path)), iteration,
                                      samples, classes, predicates, top_k)
        atomic_save_file(path, lambda tmp: shutil.copyfile(out, tmp))
        return out

    return SceneGraphSamplesHook(draw)
