"""Build notebooks/ssd_pytorch.ipynb from the cells below.

Run: python notebooks/build_ssd_pytorch.py --execute (runs it headless and stores it with its
outputs, as committed; see nbbuild.py). The notebook walks through ssd.pytorch's SSD300
training pipeline with gluontrain's PyTorch recipe; tests/test_notebooks.py executes it and
checks that the committed outputs are still what the cells produce.
"""
import os

from nbbuild import main  # pylint: disable=import-error

HERE = os.path.dirname(os.path.abspath(__file__))

CELLS = [
    ('md', """# SSD300 training, step by step (ssd.pytorch's `train.py` through gluontrain)

The PyTorch counterpart of the YOLOv3 walkthrough: the 8732 prior boxes of SSD300, which priors
a ground-truth box is matched to (and what the network must regress for them), the training
augmentation, a short training run through the recipe's functions, its curves, and detections.
Everything runs on the CPU on a tiny generated VOC-format dataset in well under a minute; the
network is SSD300 with every channel count divided by 16 (`--width_mult 0.0625`) and a VGG base
with BatchNorm (`--batch_norm true`), since no ImageNet VGG can be downloaded here."""),
    ('code', """import os
os.environ.setdefault('OMP_NUM_THREADS', '1')
import tempfile
import time

import cv2
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Image, display

from gluontrain.data import synthetic
from gluontrain.core.plots import read_metrics
from gluontrain.torch.ssd import config
from gluontrain.torch.ssd.augmentations import SSDAugmentation
from gluontrain.torch.ssd.box_utils import decode, encode, jaccard, match, point_form
from gluontrain.torch.data import VOCDetection
from gluontrain.torch.ssd.prior_box import PriorBox
from gluontrain.torch.ssd.recipe import (get_dataloader, get_dataset, get_net, parse_args,
                                        train, validate)
from gluontrain.torch.ssd.plots import draw_val_samples

%matplotlib inline
torch.set_num_threads(1)
# a fresh folder made the current one: paths below, and those printed, are relative to it
os.chdir(tempfile.mkdtemp(prefix='ssd_walkthrough_'))
WORK = '.'
print('working folder:', os.path.basename(os.getcwd()))"""),
    ('md', """## 1. The data

A generated VOCdevkit (coloured shapes named after five VOC classes) stands in for Pascal VOC.
ssd.pytorch's `VOCDetection` reads it with `VOCAnnotationTransform`: difficult objects are
dropped (`keep_difficult=False`) and every box becomes `(coord - 1) / size`, i.e. fractions of
the image (VOC's pixels are 1-based)."""),
    ('code', """devkit = synthetic.write_voc(os.path.join(WORK, 'voc'), num_train=40, num_val=12, seed=0,
                             years=(2007, 2012), classes=synthetic.DEFAULT_VOC_CLASSES,
                             image_size=(120, 160), max_objects=3)
devkit = os.path.relpath(devkit)  # the writers return absolute paths
raw = VOCDetection(devkit, [('2007', 'trainval'), ('2012', 'trainval')], transform=None)
# the first image with two or more (non-difficult) objects
index = next(i for i in range(len(raw)) if len(raw.pull_anno(i)[1]) >= 2)
image = raw.pull_image(index)           # BGR uint8, as cv2 reads it
h, w = image.shape[:2]
_, rows = raw.pull_anno(index)          # the annotation transform at width = height = 1
target = np.array(rows, np.float32) / np.array([w, h, w, h, 1], np.float32)
print(len(raw), 'training images; image', index, 'is', image.shape,
      '\\ntarget rows [x0, y0, x1, y1, class]:\\n', target)
assert (target[:, :4] >= 0).all() and (target[:, :4] <= 1).all()"""),
    ('md', """## 2. The 8732 priors

`PriorBox` places boxes on six feature maps (38, 19, 10, 5, 3, 1 cells a side). In every cell:
a square of side `min_size`, a square of side `sqrt(min_size * max_size)`, and for each aspect
ratio `r` a box `min_size * (sqrt(r), 1/sqrt(r))` and its transpose. Maps with ratios [2] give
4 boxes per cell, those with [2, 3] give 6:
38²·4 + 19²·6 + 10²·6 + 5²·6 + 3²·4 + 1²·4 = 8732. Coordinates are `(cx, cy, w, h)` as fractions
of the 300-pixel input, in ssd.pytorch's order (map by map, cells row-major, then the boxes
of a cell) and clipped to [0, 1]."""),
    ('code', """priors = PriorBox(config.voc).forward()
print(priors.shape, '\\nfirst four (cell 0 of the 38x38 map):\\n', priors[:4])
assert priors.shape == (8732, 4)
# hand-computed: centre 0.5 / (300 / 8); sides 30/300, sqrt(30 * 60)/300, 30/300 * sqrt(2)^(+-1)
c = 0.5 / 37.5
expected = [[c, c, 0.1, 0.1], [c, c, np.sqrt(1800) / 300, np.sqrt(1800) / 300],
            [c, c, 0.1 * np.sqrt(2), 0.1 / np.sqrt(2)], [c, c, 0.1 / np.sqrt(2), 0.1 * np.sqrt(2)]]
assert np.allclose(priors[:4].numpy(), expected, atol=1e-6)

counts = [f * f * n for f, n in zip(config.voc['feature_maps'], [4, 6, 6, 6, 4, 4])]
starts = np.cumsum([0] + counts)
fig, axes = plt.subplots(1, 6, figsize=(18, 3.3))
canvas = cv2.resize(image, (300, 300))[:, :, ::-1]
for k, ax in enumerate(axes):
    f = config.voc['feature_maps'][k]
    per_cell = counts[k] // (f * f)
    cell = (f // 2) * f + f // 2            # the centre cell of this map
    first = starts[k] + cell * per_cell
    ax.imshow(canvas)
    for cx, cy, bw, bh in (priors[first:first + per_cell].numpy() * 300):
        ax.add_patch(plt.Rectangle((cx - bw / 2, cy - bh / 2), bw, bh, fill=False, lw=1.5,
                                   color='yellow'))
    ax.set_title('map {}: {}x{}, {} boxes/cell'.format(k, f, f, per_cell), fontsize=9)
    ax.axis('off')
plt.show()"""),
    ('md', """## 3. Matching: which priors learn which box

`match` computes the IoU of every prior with every ground-truth box. A prior takes the box it
overlaps most, and is positive when that IoU is at least 0.5; every box's single best prior
is forced positive too, so no object goes unmatched. The network is trained to regress, for
each positive prior, the box's offset from it: `encode` gives
`((gcx - pcx) / (0.1 pw), (gcy - pcy) / (0.1 ph), log(gw / pw) / 0.2, log(gh / ph) / 0.2)`,
and `decode` inverts it. Everything else is background, of which only the hardest three per
positive enter the classification loss (hard negative mining). A shape without a box is a
*difficult* object: the generator marks some, and `keep_difficult=False` drops them from
training (VOC07 evaluation ignores them)."""),
    ('code', """truths = torch.from_numpy(target[:, :4])
labels = torch.from_numpy(target[:, 4]).long()
loc_t, conf_t = torch.zeros(1, 8732, 4), torch.zeros(1, 8732, dtype=torch.long)
match(0.5, truths, priors, config.voc['variance'], labels, loc_t, conf_t, 0)
positive = conf_t[0] > 0
overlaps = jaccard(truths, point_form(priors))
print('positives per ground-truth box:',
      [int(((overlaps.argmax(0) == g) & positive).sum()) for g in range(len(truths))])
print('IoU of the positives: min {:.2f}, max {:.2f}'.format(
    float(overlaps.max(0).values[positive].min()), float(overlaps.max(0).values[positive].max())))
# the regression targets decode back to the boxes exactly
back = decode(loc_t[0][positive], priors[positive], config.voc['variance'])
best_gt = overlaps.argmax(0)[positive]
assert torch.allclose(back, truths[best_gt], atol=1e-5)
assert (conf_t[0][positive] == labels[best_gt] + 1).all()

fig, ax = plt.subplots(figsize=(5, 5))
ax.imshow(canvas)
colors = plt.cm.tab10(np.arange(len(truths)))
for g, (x0, y0, x1, y1) in enumerate(truths.numpy() * 300):
    ax.add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, lw=3, color=colors[g]))
for p in np.nonzero(positive.numpy())[0]:
    x0, y0, x1, y1 = point_form(priors[p:p + 1])[0].numpy() * 300
    g = int(overlaps[:, p].argmax())
    ax.add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, lw=0.8, ls='--',
                               color=colors[g]))
ax.set_title('ground truth (thick) and its matched priors (dashed)', fontsize=9)
ax.axis('off')
plt.show()"""),
    ('md', """## 4. The training augmentation

`SSDAugmentation` in ssd.pytorch's order: photometric distortion (brightness, contrast,
saturation, hue, channel swap), expansion onto a canvas up to 4x the size filled with the mean,
a random crop that keeps boxes whose centre lies inside it (with a minimum IoU drawn from
{none, 0.1, 0.3, 0.7, 0.9}), a horizontal mirror, resizing to 300 x 300 and mean subtraction.
Boxes follow every geometric step and stay fractions of the image."""),
    ('code', """augment = SSDAugmentation(300, config.MEANS)
np.random.seed(3)
fig, axes = plt.subplots(1, 4, figsize=(14, 3.6))
axes[0].imshow(canvas)
for x0, y0, x1, y1 in truths.numpy() * 300:
    axes[0].add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, lw=2, color='cyan'))
axes[0].set_title('original (resized)', fontsize=9)
for k in range(1, 4):
    img, boxes, labs = augment(image.copy(), target[:, :4].copy(), target[:, 4].copy())
    assert img.shape == (300, 300, 3) and len(boxes) == len(labs) >= 1
    assert (boxes >= 0).all() and (boxes <= 1).all() and (boxes[:, 2:] > boxes[:, :2]).all()
    pic = np.clip((img + np.array(config.MEANS)) / 255, 0, 1)[:, :, ::-1]
    axes[k].imshow(pic)
    for x0, y0, x1, y1 in boxes * 300:
        axes[k].add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, lw=2,
                                        color='cyan'))
    axes[k].set_title('augmented #{}: {} boxes'.format(k, len(boxes)), fontsize=9)
for ax in axes:
    ax.axis('off')
plt.show()"""),
    ('md', """## 5. A short training run through the recipe's functions

The functions behind `gluontrain train ssd` (ssd.pytorch's `train.py` order): arguments,
dataset, network, loaders, `train`. ssd.pytorch's defaults (SGD, lr 1e-3, momentum 0.9,
weight decay 5e-4, `gamma` 0.1 at `lr_steps`) with a short schedule: 20 iterations of batch 8,
the rate divided by 10 at iteration 15. Every run writes `ssd300_VOC_train.log`,
`ssd300_VOC_metrics.jsonl`, `ssd300_VOC_curves.png` and `ssd300_VOC_val_samples.png`."""),
    ('code', """args = parse_args(['--dataset_root', devkit, '--basenet', '', '--batch_norm', 'true',
                   '--width_mult', '0.0625', '--cuda', 'false', '--batch_size', '8',
                   '--num_workers', '0', '--max_iter', '20', '--lr_steps', '15',
                   '--save_interval', '0', '--log_interval', '10', '--seed', '0',
                   '--save_folder', os.path.join(WORK, 'run') + '/'])
torch.manual_seed(args.seed)
np.random.seed(args.seed)
ctx = [torch.device('cpu')]
train_dataset, val_dataset, eval_metric = get_dataset(args.dataset, args)
net, async_net = get_net(args, ctx)
train_data, val_data = get_dataloader(async_net, train_dataset, val_dataset,
                                      args.cfg['min_dim'], args.batch_size,
                                      args.num_workers, args)
untrained = validate(net, val_data, ctx, eval_metric)[1][-1]
tic = time.time()
state = train(net, train_data, val_data, eval_metric, ctx, args)
print('trained in {:.0f} s; VOC07 mAP untrained {:.4f}, after {} iterations {:.4f}'.format(
    time.time() - tic, untrained, state.iteration, state.scores['val'][1][-1]))
assert state.iteration == 20"""),
    ('md', """## 6. Curves

Per-pass mean of the localisation and classification losses, the learning rate (dashed,
right axis) and the VOC07 mAP of the final validation. The recipe counts iterations as
ssd.pytorch does; a pass over these 80 images is 10 iterations, so the second pass (iteration
20) ends the run."""),
    ('code', """prefix = os.path.join(args.save_folder, 'ssd300_VOC')
records = read_metrics(prefix + '_metrics.jsonl')
for r in records:
    print(r['epoch'], 'lr {:.0e}'.format(r['lr']), {k: round(v, 2) for k, v in r['loss_epoch'].items()})
first, last = records[0]['loss_epoch'], records[-1]['loss_epoch']
assert sum(last.values()) < sum(first.values())  # the losses went down
display(Image(filename=prefix + '_curves.png'))"""),
    ('md', """## 7. Detections on validation images

Ground truth dashed cyan, detections red with class and score (softmax, then `Detect`:
decoding, confidence 0.01, per-class NMS at IoU 0.45, 200 per class). Thirty iterations from
random weights have learnt little; the point is the pipeline. `validate` computes VOC07
11-point mAP as ssd.pytorch's `eval.py`, and gives the same number again for the same
weights."""),
    ('code', """again = validate(net, val_data, ctx, eval_metric)[1][-1]
assert again == state.scores['val'][1][-1]
path = draw_val_samples(net, val_dataset, os.path.join(WORK, 'samples.png'), ctx[0], num=4,
                        thresh=0.1)
display(Image(filename=path))"""),
]


if __name__ == '__main__':
    main(CELLS, os.path.join(HERE, 'ssd_pytorch.ipynb'))
