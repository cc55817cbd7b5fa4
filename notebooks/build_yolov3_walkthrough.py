"""Build notebooks/yolov3_walkthrough.ipynb from the cells below.

Run: python notebooks/build_yolov3_walkthrough.py --execute (runs it headless and stores it
with its outputs, as committed; see nbbuild.py). The notebook walks through GluonCV's YOLOv3
training pipeline with gluontrain's functions; tests/test_notebooks.py executes it and checks
that the committed outputs are still what the cells produce.
"""
import os

from nbbuild import main  # pylint: disable=import-error

HERE = os.path.dirname(os.path.abspath(__file__))

CELLS = [
    ('md', """# YOLOv3 training, step by step (GluonCV's `train_yolo3.py` through gluontrain)

This notebook follows the data of one YOLOv3 training run from the dataset to the detections:
batchify functions, the training transform, the targets the loss is computed against, a short
training run through gluontrain's recipe functions, its curves, and detections on validation
images. Everything runs on the CPU on a tiny generated VOC-format dataset in under a minute.

本笔记按数据流程讲解 YOLOv3 的训练：batchify、数据增强、训练目标（target）的生成、训练、曲线和检测结果。"""),
    ('code', """import os
os.environ.setdefault('OMP_NUM_THREADS', '1')
import tempfile
import time

import matplotlib.pyplot as plt
import mxnet as mx
import numpy as np
from IPython.display import Image, display

# gluoncv is imported through gluontrain's shim (plain `import gluoncv` fails beside torch 2)
from gluontrain.mx import gluoncv
from gluoncv.data import VOCDetection
from gluoncv.data.batchify import Pad, Stack, Tuple
from gluoncv.data.transforms.presets.yolo import YOLO3DefaultTrainTransform
from gluoncv.model_zoo.yolo.yolo_target import YOLOV3TargetMerger

from gluontrain.data import synthetic
from gluontrain.core.plots import plot_curves, read_metrics
from gluontrain.mx.context import get_contexts
from gluontrain.mx.yolo3 import get_dataloader, get_dataset, get_net, parse_args, train
from gluontrain.mx.yolo3.infer import evaluate
from gluontrain.mx.yolo3.plots import draw_val_samples

# after the imports: importing gluoncv selects matplotlib's Agg backend
%matplotlib inline
# a fresh folder made the current one: paths below, and those printed, are relative to it
os.chdir(tempfile.mkdtemp(prefix='yolov3_walkthrough_'))
WORK = '.'
gluoncv.utils.random.seed(233)
print('working folder:', os.path.basename(os.getcwd()))"""),
    ('md', """## 1. Batchify: Tuple, Stack, Pad

A data loader receives a list of samples and must make one batch of each field.

+ `Tuple` 将各个函数分别顺序作用于对应的元素 — applies the i-th function to the i-th field
+ `Stack` 将参数堆叠 — stacks equal-shaped arrays along a new first axis
+ `Pad` 按照最长的元素，将较短元素填充补足 — pads shorter arrays to the longest (ground-truth
  boxes: every image has a different number of objects, padded with -1 so they can be ignored)"""),
    ('code', """a = ([1, 2, 3, 4], 0)
b = ([5, 7], 1)
batch = Tuple(Pad(), Stack())([a, b])
print(batch[0], batch[1])
assert batch[0].asnumpy().tolist() == [[1, 2, 3, 4], [5, 7, 0, 0]]

x = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
y = np.array([[5, 6, 7, 8], [1, 2, 3, 4]])
print(Stack()([x, y]).shape)
assert Stack()([x, y]).shape == (2, 2, 4)

z = np.array([[5, 8], [1, 2]])
padded = Pad(axis=1, pad_val=-1)([x, z])
print(padded)
assert padded.asnumpy()[1].tolist() == [[5, 8, -1, -1], [1, 2, -1, -1]]"""),
    ('md', """The recipe's training batch has seven fields: the image and the five prefetched target
arrays are stacked, the ground-truth boxes padded (`train_batchify_fn`); validation batches
are the image (stacked) and the labels (padded)."""),
    ('code', """from gluontrain.mx.yolo3.data import train_batchify_fn, val_batchify_fn
print('train:', [type(f).__name__ for f in train_batchify_fn()._fn])
print('val:  ', [type(f).__name__ for f in val_batchify_fn()._fn])"""),
    ('md', """## 2. The data and the training transform

A generated VOCdevkit (coloured shapes named after five VOC classes) stands in for Pascal VOC;
it has the real on-disk format, so `VOCDetection` reads it unchanged.

YOLOv3 默认使用的 transform（`YOLO3DefaultTrainTransform`）:

1. random color jittering — 随机颜色抖动
1. random expansion with prob 0.5 — 以 0.5 的概率随机扩展（放大画布）
1. random cropping — 随机裁剪
1. resize with random interpolation — 随机插值方式缩放
1. random horizontal flip — 随机水平翻转
1. to tensor (and normalise with the ImageNet mean and std)

Boxes follow every geometric step. With `net=None` the transform returns the image and its
boxes; with a network it also returns the training targets (section 3)."""),
    ('code', """devkit = synthetic.write_voc(os.path.join(WORK, 'voc'), num_train=24, num_val=16, seed=0,
                             years=(2007, 2012), classes=synthetic.DEFAULT_VOC_CLASSES,
                             image_size=(112, 144), max_objects=4)
devkit = os.path.relpath(devkit)  # the writers return absolute paths
train_raw = VOCDetection(root=devkit, splits=[(2007, 'trainval'), (2012, 'trainval')])
val_raw = VOCDetection(root=devkit, splits=[(2007, 'test')])
print(len(train_raw), 'training images,', len(val_raw), 'validation images')
img, label = train_raw[0]
print('image', img.shape, img.dtype, '\\nlabel rows [x0, y0, x1, y1, class, difficult]:\\n', label)"""),
    ('code', """MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])

def show(ax, image, boxes, title):
    ax.imshow(image)
    for x0, y0, x1, y1 in boxes[:, :4]:
        ax.add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, color='cyan', lw=2))
    ax.set_title(title, fontsize=9)
    ax.axis('off')

augment = YOLO3DefaultTrainTransform(160, 160, net=None)
fig, axes = plt.subplots(1, 4, figsize=(12, 3.2))
show(axes[0], img.asnumpy(), label, 'original {}x{}'.format(img.shape[1], img.shape[0]))
for k in range(1, 4):
    np.random.seed(k)
    tensor, boxes = augment(img, label)
    # back from the normalised CHW tensor to a picture
    pic = np.clip(tensor.asnumpy().transpose(1, 2, 0) * STD + MEAN, 0, 1)
    assert tensor.shape == (3, 160, 160) and (boxes[:, :4] >= 0).all() and (boxes[:, :4] <= 160).all()
    show(axes[k], pic, boxes, 'augmented #{} (160x160)'.format(k))
plt.show()"""),
    ('md', """## 3. Training targets: `YOLOV3PrefetchTargetGenerator`

With a network, the transform runs the network once on zeros (to learn its feature-map sizes,
anchors and offsets) and then, for every sample, `YOLOV3PrefetchTargetGenerator` matches each
ground-truth box to the one anchor (of nine, over three scales) with the best IoU of shapes.
It returns `objectness, center_targets, scale_targets, weights, class_targets`; with the image
and the padded ground-truth boxes, these are the seven fields of a training batch.

集成到 `YOLO3DefaultTrainTransform` 中实现：当参数 `net == None` 时返回训练样本和标签两个值；
`net` 不为空时还返回 objectness, center_targets, scale_targets, weights, class_targets，
由 `YOLOV3PrefetchTargetGenerator` 根据 img、feature maps、anchors、x/y offsets、gt_boxes、
gt_ids、gt_mixratio 生成。**只有与 gt box 匹配的 anchor 的 objectness 为 1，其余为 0。**"""),
    ('code', """net = gluoncv.model_zoo.get_model('yolo3_mobilenet0.25_voc', pretrained_base=False)
net.initialize()
t = YOLO3DefaultTrainTransform(160, 160, net)
sizes = [f.shape[2:] for f in t._feat_maps]
print('feature maps', sizes, 'anchors per layer (w, h):')
print(np.stack([a.asnumpy().reshape(3, 2) for a in t._anchors]))

# one box of class 7 (cat) centred at (70, 90), 60 x 80 pixels, on a 160 x 160 input
gt = mx.nd.array([[[40, 50, 100, 130]]])
gt_id = mx.nd.array([[[7]]])
obj, center, scale, weight, cls = [o.asnumpy()[0] for o in t._target_generator(
    t._fake_x, t._feat_maps, t._anchors, t._offsets, gt, gt_id, None)]
print('shapes', obj.shape, center.shape, scale.shape, weight.shape, cls.shape)
hits = np.nonzero(obj[:, 0])[0]
print('anchors with objectness 1:', hits)
assert len(hits) == 1 and obj.sum() == 1  # only the matched anchor is positive"""),
    ('code', """i = int(hits[0])
# rows are ordered layer by layer, cell by cell (row-major), three anchors per cell
starts = np.cumsum([0] + [h * w * 3 for h, w in sizes])
layer = int(np.searchsorted(starts, i, side='right') - 1)
h, w = sizes[layer]
cell, anchor = divmod(i - starts[layer], 3)
loc_y, loc_x = divmod(cell, w)
aw, ah = t._anchors[layer].asnumpy().reshape(3, 2)[anchor]
print('layer {} ({}x{}), cell (x={}, y={}), anchor {} = {}x{}'.format(layer, h, w, loc_x, loc_y, anchor, aw, ah))
print('center target', center[i], '  scale target', scale[i], '  weight', weight[i])
print('class target', cls[i])
# centre: offset of the box centre inside its cell, in cells
assert np.allclose(center[i], [70 / 160 * w - loc_x, 90 / 160 * h - loc_y])
# scale: log of box size over anchor size
assert np.allclose(scale[i], [np.log(60 / aw), np.log(80 / ah)])
# weight: small boxes weigh more, 2 - (box area / image area)
assert np.allclose(weight[i], 2 - 60 * 80 / 160 / 160)
assert cls[i].argmax() == 7 and cls[i].sum() == 1 and (cls[np.arange(len(cls)) != i] == -1).all()"""),
    ('md', """**Label smoothing** (`--label-smooth`) happens later, in the network's
`YOLOV3TargetMerger`: the positive class becomes `1 - eps` and the other classes `eps`, with
`eps = min(1 / num_class, 1 / 40)` (0.025 for VOC's 20 classes). Anchors that match nothing
keep -1 and are masked out of the class loss."""),
    ('code', """merger = YOLOV3TargetMerger(20, 0.7)
merger._label_smooth = True
targets = [mx.nd.array(a[None]) for a in (obj, center, scale, weight, cls)]
smoothed = merger(mx.nd.zeros((1, obj.shape[0], 4)), gt, *targets)[4].asnumpy()[0]
print('matched anchor:', smoothed[i])
print('another anchor:', smoothed[0][:5], '...')
assert np.isclose(smoothed[i][7], 0.975) and np.allclose(np.delete(smoothed[i], 7), 0.025)"""),
    ('md', """## 4. A short training run through the recipe's functions

The same functions as `gluontrain train yolo3` (GluonCV's `train_yolo3.py` order): arguments,
dataset, network, loaders, `train`. Tiny settings: mobilenet0.25 from random weights, 64 px,
batch 4, lr 0.002, 4 epochs. Every run writes `{prefix}_train.log` (GluonCV's lines),
`{prefix}_metrics.jsonl`, `{prefix}_curves.png` and `{prefix}_val_samples.png`."""),
    ('code', """args = parse_args(['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root', devkit,
                   '--no-pretrained-base', '--gpus', '', '--batch-size', '4', '-j', '0',
                   '--lr', '0.002', '--data-shape', '64', '--no-random-shape', '--epochs', '4',
                   '--warmup-epochs', '1', '--lr-decay-epoch', '3', '--log-interval', '0',
                   '--save-interval', '0', '--save-prefix', os.path.join(WORK, 'run') + '/'])
gluoncv.utils.random.seed(args.seed)
args.save_prefix += 'yolo3_mobilenet0.25_voc'
ctx = get_contexts(args.gpus, args.cpus)
train_dataset, val_dataset, eval_metric = get_dataset(args.dataset, args)
net, async_net = get_net(args, ctx)
train_data, val_data = get_dataloader(async_net, train_dataset, val_dataset, args.data_shape,
                                      args.batch_size, args.num_workers, args)
tic = time.time()
state = train(net, train_data, val_data, eval_metric, ctx, args)
print('trained in {:.0f} s; last validation mAP {:.4f}'.format(time.time() - tic, state.current))"""),
    ('md', """## 5. Curves

Per-epoch mean of each loss, the learning rate of each epoch's last update (dashed, right
axis: `--lr 0.002` after the one-epoch linear warm-up, then the step decay of
`--lr-decay-epoch 3`, which GluonCV's step scheduler applies from the last update of epoch 2
on) and the validation mAP. `plot_curves` draws the same picture from a
finished run's `metrics.jsonl` (`python scripts/plot_log.py run_metrics.jsonl`)."""),
    ('code', """records = read_metrics(args.save_prefix + '_metrics.jsonl')
for r in records:
    print(r['epoch'], 'lr {:.2e}'.format(r['lr']), {k: round(v, 2) for k, v in r['loss_epoch'].items()},
          'mAP', r['val']['mAP'])
assert [r['epoch'] for r in records] == list(range(4))
# 2e-3 from the warm-up's end until epoch 2's last update, then the step decay
assert np.allclose([r['lr'] for r in records], [2e-3, 2e-3, 2e-4, 2e-4])
first, last = records[0]['loss_epoch'], records[-1]['loss_epoch']
assert sum(last.values()) < sum(first.values())  # the losses went down
display(Image(filename=args.save_prefix + '_curves.png'))"""),
    ('md', """## 6. Detections on validation images

Ground truth dashed cyan, predictions red with class and score. After four epochs on 48 images
the network has learnt little — the point is the pipeline; train longer (or from the
ImageNet base) for real boxes. Evaluation is the recipe's `validate` (VOC07 mAP), as
`scripts/eval_yolov3.py` runs it."""),
    ('code', """names, values = evaluate(net, val_raw, eval_metric, ctx, args.data_shape)
print('VOC07 mAP {:.4f}'.format(values[-1]))
assert values[-1] == state.current  # the same number validation reported
path = draw_val_samples(net, val_raw, val_raw.classes, os.path.join(WORK, 'samples.png'),
                        ctx[0], args.data_shape, num=4, thresh=0.05)
display(Image(filename=path))"""),
]


if __name__ == '__main__':
    main(CELLS, os.path.join(HERE, 'yolov3_walkthrough.ipynb'))
