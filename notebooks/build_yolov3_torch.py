"""Build notebooks/yolov3_torch.ipynb from the cells below.

Run: python notebooks/build_yolov3_torch.py --execute (runs it headless and stores it with its
outputs, as committed; see nbbuild.py). The notebook takes a GluonCV YOLOv3 off MXNet: its
``.params`` read without MXNet, the same detections from both backends, a short training run on
PyTorch from those weights, and the trained weights back into GluonCV. tests/test_notebooks.py
executes it and checks that the committed outputs are still what the cells produce.
"""
import os

from nbbuild import main  # pylint: disable=import-error

HERE = os.path.dirname(os.path.abspath(__file__))

CELLS = [
    ('md', """# GluonCV's YOLOv3 on PyTorch: the way off MXNet

A GluonCV user's YOLOv3 is a `.params` file, a `train_yolo3.py` command line and its numbers.
This notebook carries all three to PyTorch: it reads a `.params` that GluonCV wrote **without
MXNet**, shows that both backends find the same boxes on the same image, trains on PyTorch
from those weights with GluonCV's command line, and loads the result back into GluonCV.
MXNet is imported here only to play GluonCV's part; the PyTorch side never needs it
(`pip install -e '.[torch]'`). Everything runs on the CPU on a tiny generated VOC-format
dataset in about a minute."""),
    ('code', """import os
os.environ.setdefault('OMP_NUM_THREADS', '1')
import random
import tempfile
import time

import mxnet as mx
import numpy as np
import torch
from IPython.display import Image, display

# gluoncv is imported through gluontrain's shim (plain `import gluoncv` fails beside torch 2)
from gluontrain.mx import gluoncv
from gluontrain.mx.yolo3.plots import detect as mxnet_detect

from gluontrain.core import mxparams
from gluontrain.core.plots import draw_samples, read_metrics
from gluontrain.data import synthetic
from gluontrain.torch import yolo3
from gluontrain.torch.yolo3.plots import detect as torch_detect

%matplotlib inline
# a fresh folder made the current one: paths below, and those printed, are relative to it
os.chdir(tempfile.mkdtemp(prefix='yolov3_torch_'))
print('working folder:', os.path.basename(os.getcwd()))"""),
    ('md', """## 1. A `.params` written by GluonCV, read without MXNet

GluonCV's `yolo3_mobilenet0.25_voc`, initialised by Gluon with a fixed seed, saved with
`save_parameters` as any GluonCV training run saves its weights. `gluontrain.core.mxparams`
reads MXNet's NDArray-list format in plain numpy: every array, bit for bit."""),
    ('code', """mx.random.seed(0)
gnet = gluoncv.model_zoo.get_model('yolo3_mobilenet0.25_voc', pretrained_base=False)
gnet.initialize()
gnet(mx.nd.zeros((1, 3, 64, 64)))  # deferred shapes
gnet.save_parameters('gluoncv_init.params')

arrays = mxparams.read_params('gluoncv_init.params')  # numpy only
print(len(arrays), 'arrays,', sum(a.size for a in arrays.values()), 'numbers; the first three:')
for name in list(arrays)[:3]:
    print('  ', name, arrays[name].shape, arrays[name].dtype)
gluon = {k: p.data().asnumpy() for k, p in gnet._collect_params_with_prefix().items()}
assert sorted(arrays) == sorted(gluon)
assert all(np.array_equal(arrays[k], gluon[k]) for k in gluon)"""),
    ('md', """## 2. Into the PyTorch YOLOv3, with a report

`yolo3.get_yolov3` builds GluonCV's network in PyTorch (the same layers, GluonCV's BatchNorm
epsilon and momentum, its decoding and `box_nms`); `yolo3.load_params` maps the Gluon names
to the torch modules and says what it loaded, as detectron2's checkpointer does: a file of
another network is refused in one line naming what is missing or unexpected."""),
    ('code', """tnet = yolo3.get_yolov3('yolo3_mobilenet0.25_voc')
report = yolo3.load_params(tnet, 'gluoncv_init.params')
print(report.format())
assert not report.missing and not report.unexpected

try:  # a mobilenet1.0 network does not take mobilenet0.25 weights
    yolo3.load_params(yolo3.get_yolov3('yolo3_mobilenet1.0_voc'), 'gluoncv_init.params')
except Exception as err:  # WeightsLoadError: one line
    print(type(err).__name__ + ':', err)"""),
    ('md', """## 3. The same detections from both backends

A generated VOCdevkit (coloured shapes named after five VOC classes, the real on-disk format).
Each backend runs its own validation pipeline on the same raw image: GluonCV's
`YOLO3DefaultValTransform` and network on MXNet, gluontrain's numpy transform and the torch
network on PyTorch. The weights are untrained: Gluon initialises every bias to zero and the
small random weights barely move the logits, so every score is 0.25 (objectness 0.5 times
class 0.5) and the order of the rows is decided by `box_nms`'s order among ties alone, which
the PyTorch side reproduces: the same boxes, scores and classes, in the same order."""),
    ('code', """devkit = synthetic.write_voc('voc', num_train=24, num_val=8, seed=0, years=(2007, 2012),
                             classes=synthetic.DEFAULT_VOC_CLASSES, image_size=(112, 144),
                             max_objects=4)
devkit = os.path.relpath(devkit)  # the writers return absolute paths
val_raw = gluoncv.data.VOCDetection(root=devkit, splits=[(2007, 'test')])
img, label = val_raw[0]
SHAPE = 64
# the detections are in the image's pixels; tolerances are in the network input's (64 px)
per_input_px = np.array([img.shape[1], img.shape[0]] * 2, np.float32) / SHAPE

def box_gap(a, b):
    return np.abs((a - b) / per_input_px).max()

tnet.eval()
g = mxnet_detect(gnet, img, mx.cpu(), SHAPE)
t = torch_detect(tnet, img.asnumpy(), torch.device('cpu'), SHAPE)
print('detections: MXNet', len(g[0]), ' PyTorch', len(t[0]))
print('first five (class, score, box) on MXNet, then PyTorch:')
for k in range(5):
    print('  ', g[0][k], '{:.5f}'.format(g[1][k]), np.round(g[2][k], 2), '  |  ',
          t[0][k], '{:.5f}'.format(t[1][k]), np.round(t[2][k], 2))
assert np.array_equal(g[0], t[0])  # the same classes in the same order
print('max |score difference| {:.1e}, max |box difference| {:.1e} input px'.format(
    np.abs(g[1] - t[1]).max(), box_gap(g[2], t[2])))
assert np.abs(g[1] - t[1]).max() < 1e-4 and box_gap(g[2], t[2]) < 1e-3"""),
    ('md', """## 4. Training on PyTorch from GluonCV's weights

GluonCV's `train_yolo3.py` command line, with `--backend torch` (`python
scripts/train_yolov3.py --backend torch ...` runs the same): `--load-weights` starts from
the `.params` above and its report goes to the head of the training log. Tiny settings:
mobilenet0.25, 64 px, batch 4, lr 0.002 with a one-epoch warm-up, 4 epochs. The run writes
GluonCV's `{prefix}_train.log` lines, `{prefix}_metrics.jsonl`, curves and the `.params` files
GluonCV writes (`{prefix}_best.params`)."""),
    ('code', """args = yolo3.parse_args(['--backend', 'torch', '--network', 'mobilenet0.25', '--dataset', 'voc',
                         '--dataset-root', devkit, '--load-weights', 'gluoncv_init.params',
                         '--gpus', '', '--batch-size', '4', '-j', '0', '--lr', '0.002',
                         '--data-shape', str(SHAPE), '--no-random-shape', '--epochs', '4',
                         '--warmup-epochs', '1', '--lr-decay-epoch', '3', '--log-interval', '0',
                         '--save-interval', '0', '--save-prefix', 'run/'])
random.seed(args.seed)  # the seeds of train_yolo3.py's __main__
np.random.seed(args.seed)
torch.manual_seed(args.seed)
args.save_prefix += 'yolo3_mobilenet0.25_voc'
ctx = [torch.device('cpu')]
train_dataset, val_dataset, eval_metric = yolo3.get_dataset(args.dataset, args)
net, async_net = yolo3.get_net(args, ctx)
reports = [yolo3.load_params(net, args.load_weights, '--load-weights').format()]
train_data, val_data = yolo3.get_dataloader(async_net, train_dataset, val_dataset, args.data_shape,
                                            args.batch_size, args.num_workers, args)
tic = time.time()
state = yolo3.train(net, train_data, val_data, eval_metric, ctx, args, reports=reports)
print('trained in {:.0f} s; last validation mAP {:.4f}'.format(time.time() - tic, state.current))"""),
    ('code', """records = read_metrics(args.save_prefix + '_metrics.jsonl')
for r in records:
    print(r['epoch'], 'lr {:.2e}'.format(r['lr']), {k: round(v, 2) for k, v in r['loss_epoch'].items()},
          'mAP', r['val']['mAP'])
assert [r['epoch'] for r in records] == list(range(4))
assert np.allclose([r['lr'] for r in records], [2e-3, 2e-3, 2e-4, 2e-4])  # GluonCV's step decay
first, last = records[0]['loss_epoch'], records[-1]['loss_epoch']
assert sum(last.values()) < sum(first.values())  # the losses went down
display(Image(filename=args.save_prefix + '_curves.png'))"""),
    ('md', """## 5. Back into GluonCV

`save_params` of the PyTorch recipe writes MXNet's format without MXNet (the run's
`{prefix}_best.params` and interval files are written the same way): GluonCV's own
`load_parameters` takes the trained weights. Four epochs from random weights on 48 images
teach the network little (the scores stay small, the mAP 0), so rather than the few rows NMS
keeps, both networks are asked for every decoded row (`set_nms(nms_thresh=0)`: NMS off) and
the two backends' rows, one per anchor and class, are compared one by one."""),
    ('code', """from gluontrain.torch.yolo3.weights import save_params
save_params(net, 'trained.params')
gnet.load_parameters('trained.params')
net.eval()
for model in (gnet, net):
    model.set_nms(nms_thresh=0)  # every decoded row, before NMS
g = mxnet_detect(gnet, img, mx.cpu(), SHAPE)
t = torch_detect(net, img.asnumpy(), torch.device('cpu'), SHAPE)
print('{} decoded rows on both; highest score {:.5f} (MXNet), {:.5f} (PyTorch)'.format(
    len(g[0]), g[1].max(), t[1].max()))
assert np.array_equal(g[0], t[0])
print('max |score difference| {:.1e}, max |box difference| {:.1e} input px'.format(
    np.abs(g[1] - t[1]).max(), box_gap(g[2], t[2])))
assert np.abs(g[1] - t[1]).max() < 1e-4 and box_gap(g[2], t[2]) < 1e-3
for model in (gnet, net):
    model.set_nms(nms_thresh=0.45, nms_topk=400, post_nms=100)  # GluonCV's defaults again"""),
    ('code', """# the five highest-scoring rows of each backend, side by side
top = [tuple(a[np.argsort(-d[1], kind='stable')[:5]] for a in d) for d in (g, t)]
path = draw_samples([(img.asnumpy(), label[:, :4], top[0]), (img.asnumpy(), label[:, :4], top[1])],
                    val_raw.classes, 'both_backends.png', thresh=0.0, max_boxes=5,
                    title='top 5 rows: GluonCV on MXNet (left), gluontrain on PyTorch (right)')
display(Image(filename=path))"""),
    ('md', """## 6. A model-zoo `.params`: evaluate it on PyTorch, then fine-tune with the zoo's command

GluonCV's zoo weights are `.params` files like the one above. `python scripts/eval_yolov3.py
--backend torch --network darknet53 --dataset voc --pretrained True --data-shape 416` fetches
`yolo3_darknet53_voc` from GluonCV's model store as `get_model(..., pretrained=True)` does (into
`~/.mxnet/models`, sha1-checked, resumed when cut; `MXNET_GLUON_REPO` honoured) and prints its
VOC07 mAP beside the zoo's published one; `--params FILE` takes a file you have. This notebook
is offline, so it evaluates the file of section 5 the same way (`eval_main` is the script's
`main`), then starts the zoo's own training command from it: `--preset mobilenet1.0_voc` sets
every argument of the zoo's logged run (docs/zoo.md), and the arguments after it shrink it to
this machine (mobilenet0.25, 64 px, batch 4, one epoch)."""),
    ('code', """from gluontrain.torch.yolo3.infer import eval_main
names, values = eval_main(['--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root', devkit,
                           '--params', 'trained.params', '--data-shape', str(SHAPE), '--gpus', '',
                           '--batch-size', '4'])
assert names[-1] == 'mAP' and 0.0 <= values[-1] <= 1.0"""),
    ('code', """from gluontrain.yolo3.args import PRESETS
print('--preset mobilenet1.0_voc:', PRESETS['mobilenet1.0_voc'])
tuned = yolo3.main(['--backend', 'torch', '--preset', 'mobilenet1.0_voc', '--network', 'mobilenet0.25',
                    '--dataset-root', devkit, '--load-weights', 'trained.params', '--gpus', '',
                    '--data-shape', str(SHAPE), '--no-random-shape', '--batch-size', '4', '-j', '0',
                    '--epochs', '1', '--warmup-epochs', '0', '--log-interval', '0',
                    '--save-prefix', 'finetune/'])
log = open('finetune/yolo3_mobilenet0.25_voc_train.log').read().splitlines()
print('\\n'.join(line for line in log if 'tensors' in line or line.startswith(('[Epoch', 'mAP='))))
assert any(line.startswith('loaded 247 of 247 tensors from trained.params') for line in log)
assert tuned.iteration == len(train_dataset) // 4  # one epoch of the zoo's command, shrunk"""),
]


if __name__ == '__main__':
    main(CELLS, os.path.join(HERE, 'yolov3_torch.ipynb'))
