"""Build notebooks/twostage_walkthrough.ipynb from the cells below.

Run: python notebooks/build_twostage_walkthrough.py --execute (runs it headless and stores it
with its outputs, as committed; see nbbuild.py). The notebook walks through seamseg's
two-stage detector (FPN Faster R-CNN, ``train_detection.py``) with gluontrain's recipe;
tests/test_notebooks.py executes it and checks that the committed outputs are still what the
cells produce.
"""
import os

from nbbuild import main  # pylint: disable=import-error

HERE = os.path.dirname(os.path.abspath(__file__))

CELLS = [
    ('md', """# The two-stage detector, step by step (seamseg's `train_detection.py` through gluontrain)

An FPN Faster R-CNN as mapillary/seamseg trains it: the anchors of the four FPN levels, which
anchors the RPN is taught to call objects, the proposals before and after their NMS, the ROIs
sampled for the second stage, a short training through the recipe's functions, its curves
and detections. Everything runs on the CPU on generated COCO-format data in about a minute,
from random weights, with the shipped small configuration
(`gluontrain/torch/frcnn/configs/synthetic_cpu.ini`: a quarter-width ResNet-18)."""),
    ('code', """import configparser
import os
os.environ.setdefault('OMP_NUM_THREADS', '1')
import random
import tempfile
import time

import matplotlib.patches as patches
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Image, display

from gluontrain.core.plots import read_metrics
from gluontrain.data.coco import write_coco
from gluontrain.torch.frcnn import recipe
from gluontrain.torch.frcnn.config import DEFAULTS_FILE
from gluontrain.torch.ops import fpn_anchors
from gluontrain.torch.twostage import algos
from gluontrain.torch.twostage.seamseg import prepare_inputs

%matplotlib inline
torch.set_num_threads(1)
# ISSTransform draws its scale and flip from Python's random, the samplers from numpy and torch
random.seed(0)
torch.manual_seed(0)
np.random.seed(0)
# a fresh folder made the current one: paths below, and those printed, are relative to it
os.chdir(tempfile.mkdtemp(prefix='twostage_walkthrough_'))
WORK = '.'
print('working folder:', os.path.basename(os.getcwd()))"""),
    ('md', """## 1. Data and configuration

COCO json + images (what users have; seamseg's own ISS format works the same and is
recognised from the folder). The shipped config with a smaller run for a walk-through: 30
training images, one per batch, resized to 128-224 px (the config: 192-320), 2 epochs;
`recipe.get_dataset` gives seamseg's `ISSTransform`-ed items: the image normalised, boxes
`(y0, x0, y1, x1)`, contiguous classes and crowd flags."""),
    ('code', """root = os.path.relpath(write_coco(os.path.join(WORK, 'coco'), num_train=30, num_val=16, seed=0))
parser = configparser.ConfigParser()
parser.read(os.path.join(os.path.dirname(DEFAULTS_FILE), 'synthetic_cpu.ini'))
parser['scheduler']['epochs'] = '2'
parser['general']['val_interval'] = '2'
parser['dataloader'].update(train_batch_size='1', shortest_size='128', longest_max_size='224')
cfg = os.path.join(WORK, 'short.ini')
with open(cfg, 'w') as f:
    parser.write(f)
args = recipe.parse_args(['--seed', '0', '--log_dir', os.path.join(WORK, 'run'), cfg, root])
train_ds, val_ds, coco_gt = recipe.get_dataset(args.data, args)
item = next(train_ds[i] for i in range(len(train_ds)) if train_ds[i]['bbx'].shape[0] >= 2)
print(len(train_ds), 'training images,', train_ds.num_thing, 'classes; image', tuple(item['img'].shape))
print('boxes (y0, x0, y1, x1):', item['bbx'].tolist())
mean = np.array([0.485, 0.456, 0.406])[:, None, None]
std = np.array([0.229, 0.224, 0.225])[:, None, None]
picture = np.clip(item['img'].numpy() * std + mean, 0, 1).transpose(1, 2, 0)

def show(ax, boxes, color, style='-', width=1.5):
    ax.imshow(picture)
    for y0, x0, y1, x1 in np.asarray(boxes).reshape(-1, 4):
        ax.add_patch(patches.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False,
                                       edgecolor=color, linestyle=style, linewidth=width))
    ax.set_xlim(0, picture.shape[1]); ax.set_ylim(picture.shape[0], 0); ax.axis('off')"""),
    ('md', """## 2. Anchors

seamseg puts 3 anchors (height/width ratios 1, 0.5, 2) of size 8 x stride on every cell of
each FPN level: 32 px on P2 (stride 4) up to 256 px on P5 (stride 32), row-major over the
cells, then by ratio — the order of the RPN's flattened logits. Drawn: the three anchors of
the centre cell of every level."""),
    ('code', """net, _ = recipe.get_net(args, [torch.device('cpu')])
net.train()
out = net.head_outputs([item['img']])
rpn = net.rpn_settings
anchors = fpn_anchors(out['level_sizes'], rpn.strides, rpn.anchor_scale, rpn.anchor_ratios,
                      torch.float32, 'cpu')
print('level sizes', out['level_sizes'], '->', anchors.shape[0], 'anchors')
assert anchors.shape[0] == sum(3 * h * w for h, w in out['level_sizes']) == out['obj_logits'].shape[1]
fig, ax = plt.subplots(figsize=(6, 5))
start = 0
for (h, w), color in zip(out['level_sizes'], ['yellow', 'orange', 'red', 'magenta']):
    centre = start + 3 * ((h // 2) * w + w // 2)
    show(ax, anchors[centre:centre + 3].numpy(), color)
    start += 3 * h * w
plt.show()"""),
    ('md', """## 3. Matched anchors

`AnchorMatcher`: anchors leaving the image or lying in a crowd box are void; IoU >= 0.7 with a
ground truth is positive, < 0.3 negative, and every ground truth claims its best anchor; then
256 are sampled, at most half positive. Solid green: positive anchors; dashed cyan: ground
truth."""),
    ('code', """cat, crowd, bbx = prepare_inputs([item['cat']], [item['iscrowd']], [item['bbx']], 0)
valid = [tuple(item['img'].shape[-2:])]
obj_lbl, bbx_lbl = algos.rpn_targets(anchors, bbx, crowd, valid, net.rpn_settings)
n_pos, n_neg = int((obj_lbl == 1).sum()), int((obj_lbl == 0).sum())
print(n_pos, 'positive,', n_neg, 'negative,', int((obj_lbl == -1).sum()), 'void anchors')
assert 0 < n_pos <= 128 and n_pos + n_neg == 256
fig, ax = plt.subplots(figsize=(6, 5))
show(ax, anchors[obj_lbl[0] == 1].numpy(), 'lime')
show(ax, bbx[0].numpy(), 'cyan', '--', 2)
plt.show()"""),
    ('md', """## 4. Proposals before and after NMS

The anchors shifted by the RPN's deltas, clipped to the image, sides of at least 16 px, the
best objectness logits (train: 2000 of the config, seamseg's default 12000), then NMS at
IoU 0.7 (`>=` suppresses) keeping at most 500 (seamseg: 2000). Untrained, the objectness is
nearly flat: the left panel's 100 best boxes pile up, NMS spreads them."""),
    ('code', """with torch.no_grad():
    boxes = algos.decode(out['bbx_logits'], anchors, weights=(1., 1., 1., 1.),
                         scale_clip=algos.SCALE_CLIP)[0]
    h, w = valid[0]
    boxes = torch.stack([boxes[:, 0].clamp(0, h), boxes[:, 1].clamp(0, w),
                         boxes[:, 2].clamp(0, h), boxes[:, 3].clamp(0, w)], 1)
    before = boxes[out['obj_logits'][0].topk(100)[1]]
    proposals = algos.generate_proposals(out['obj_logits'], out['bbx_logits'], anchors, valid,
                                         net.rpn_settings, training=True)
print(proposals[0].shape[0], 'proposals after NMS (at most', net.rpn_settings.num_post_nms[True], ')')
assert proposals[0].shape[0] <= net.rpn_settings.num_post_nms[True]
fig, axes = plt.subplots(1, 2, figsize=(11, 5))
show(axes[0], before.numpy(), 'orange', width=0.7); axes[0].set_title('100 best, before NMS')
show(axes[1], proposals[0][:100].numpy(), 'orange', width=0.7); axes[1].set_title('100 best after NMS')
plt.show()"""),
    ('md', """## 5. Sampled ROIs

`ProposalMatcher`: the ground truth is prepended to the proposals, IoU >= 0.5 is positive,
[0, 0.5) background; 64 ROIs per image here (seamseg: 128), at most 25% positive. The
positives carry the class `cat + 1` and regression targets scaled by (10, 10, 5, 5)."""),
    ('code', """rois, rois_idx, cls_lbl, roi_bbx_lbl = algos.roi_targets(proposals, bbx, cat, crowd, 0,
                                                       net.roi_settings)
pos = cls_lbl > 0
print(int(pos.sum()), 'positive and', int((~pos).sum()), 'background ROIs; classes', cls_lbl[pos].tolist())
assert int(pos.sum()) <= 0.25 * net.roi_settings.num_samples and rois.shape[0] <= net.roi_settings.num_samples
fig, ax = plt.subplots(figsize=(6, 5))
show(ax, rois[~pos].numpy(), 'red', width=0.5)
show(ax, rois[pos].numpy(), 'lime')
plt.show()"""),
    ('md', """## 6. A short training through the recipe

`get_dataloader` (seamseg's aspect-ratio batches), `train` on gluontrain's loop and hooks:
the poly rate with burn-in set per batch before the forward, seamseg's weighted losses in
the order `obj_loss, bbx_loss, roi_cls_loss, roi_bbx_loss`, its `training.log` with `det_map`
(COCO AP@[.5:.95] by pycocotools) and `model_last.pth.tar` / `model_best.pth.tar`, plus
gluontrain's metrics, curves, samples picture and `frcnn_last.ckpt` (exact `--resume`).
Two epochs only lift the AP off zero; `tests/torch/frcnn/test_frcnn_learnability.py` trains
longer and holds the learning to held-out numbers."""),
    ('code', """ctx = [torch.device('cpu')]
train_data, val_data = recipe.get_dataloader(net, train_ds, val_ds, None, None, None, args)
untrained = recipe.validate(net, val_data, ctx, coco_gt)[1][-1]
tic = time.time()
state = recipe.train(net, train_data, val_data, coco_gt, ctx, args)
trained = state.scores['val'][1][-1]
print('trained in {:.0f} s; held-out COCO AP untrained {:.4f}, after {} epochs {:.4f}'.format(
    time.time() - tic, untrained, state.epoch + 1, trained))
assert trained > untrained
print(sorted(os.listdir(args.log_dir)))"""),
    ('md', """## 7. Curves

Per-epoch means of the four losses and the learning rate (burn-in, then poly)."""),
    ('code', """records = read_metrics(os.path.join(args.log_dir, 'frcnn_metrics.jsonl'))
for r in records:
    print(r['epoch'], 'lr {:.4f}'.format(r['lr']), {k: round(v, 3) for k, v in r['loss_epoch'].items()})
assert sum(records[-1]['loss_epoch'].values()) < sum(records[0]['loss_epoch'].values())
display(Image(filename=os.path.join(args.log_dir, 'frcnn_curves.png')))"""),
    ('md', """## 8. Detections on held-out images

Ground truth dashed cyan, detections red with class and score (softmax, score > 0.05,
class-wise NMS at 0.3, the 100 best; drawn above 0.3). The validation batches come from
seamseg's aspect-ratio sampler, set to the epoch: validating again with the same epoch (the
same batches, so the same padding) gives the same AP."""),
    ('code', """again = recipe.validate(net, val_data, ctx, coco_gt, epoch=state.epoch)[1][-1]
assert again == trained
display(Image(filename=os.path.join(args.log_dir, 'frcnn_val_samples.png')))"""),
]


if __name__ == '__main__':
    main(CELLS, os.path.join(HERE, 'twostage_walkthrough.ipynb'))
