"""Build notebooks/yolov3_finetune.ipynb from the cells below.

Run: python notebooks/build_yolov3_finetune.py --execute (runs it headless and stores it with
its outputs, as committed; see nbbuild.py). The notebook fine-tunes a zoo-shaped YOLOv3 (a
20-class VOC network) to three classes of a dataset written as GluonCV's RecordIO, on PyTorch:
GluonCV's ``reset_class``, ``--transfer``, the curves, the detections before and after, the
mAP. tests/test_notebooks.py executes it and checks that the committed outputs are still
what the cells produce.
"""
import os

from nbbuild import main  # pylint: disable=import-error

HERE = os.path.dirname(os.path.abspath(__file__))

CELLS = [
    ('md', """# Fine-tune a YOLOv3 to your classes, from your RecordIO files

What GluonCV's users do most: take a model-zoo detector, give it their own classes
(`net.reset_class(classes, reuse_weights=...)`), and train it on their own images packed as
GluonCV's custom-data formats (`.lst`, or RecordIO `.rec` + `.idx` from `im2rec.py`). Here on
PyTorch, without MXNet. This machine has no zoo weights and no internet, so the "zoo" model is
a 20-class VOC network trained for half a minute on generated VOC-format data; with the real one the
commands are the same with `--transfer yolo3_mobilenet1.0_voc` (fetched from GluonCV's model
store). Everything runs on the CPU in about a minute."""),
    ('code', """import os
os.environ.setdefault('OMP_NUM_THREADS', '1')
import random
import tempfile
import time

import numpy as np
import torch
from IPython.display import Image, display

from gluontrain.core.plots import draw_samples, read_metrics
from gluontrain.data import synthetic
from gluontrain.data.classes import VOC_CLASSES
from gluontrain.data.custom_detection import RecordFileDetection
from gluontrain.data.records import write_records
from gluontrain.torch import yolo3
from gluontrain.torch.yolo3.plots import detect

%matplotlib inline
os.chdir(tempfile.mkdtemp(prefix='yolov3_finetune_'))
print('working folder:', os.path.basename(os.getcwd()))


def train(argv, seed=233):
    random.seed(seed)  # the seeds of train_yolo3.py's __main__
    np.random.seed(seed)
    torch.manual_seed(seed)
    return yolo3.main(argv)


COMMON = ['--backend', 'torch', '--network', 'mobilenet0.25', '--no-pretrained-base', '--gpus', '',
          '--batch-size', '8', '-j', '0', '--data-shape', '64', '--no-random-shape', '--lr', '0.004',
          '--warmup-epochs', '1', '--log-interval', '0', '--save-interval', '0']"""),
    ('md', """## 1. A zoo-shaped model: YOLOv3 for VOC's 20 classes

Generated VOC-format images with two of VOC's classes (`car` and `dog`, each drawn as its own
coloured shape), trained as `train_yolo3.py --dataset voc` trains: the network has VOC's
20-class head, as the zoo's `yolo3_mobilenet0.25_voc` would."""),
    ('code', """devkit = synthetic.write_voc('voc', num_train=40, num_val=20, seed=1, years=(2007, 2012),
                             classes=('car', 'dog'), image_size=(96, 128),
                             max_objects=3, object_size=(0.2, 0.6))
tic = time.time()
state = train(COMMON + ['--dataset', 'voc', '--dataset-root', os.path.relpath(devkit),
                            '--epochs', '8', '--lr-decay-epoch', '7', '--save-prefix', 'zoo/'])
print('trained in {:.0f} s; VOC07 mAP {:.3f} (best {:.3f})'.format(time.time() - tic, state.current,
                                                                  state.best))
assert state.best > 0.03  # the best epoch's file is the one fine-tuned below"""),
    ('md', """## 2. Your data, as GluonCV's RecordIO

Three classes of your own, `car`, `dog` and `bus` (the last one new to the model), written as
`im2rec.py --pack-label` writes a detection list: `train.rec` + `train.idx` and `val.rec` +
`val.idx`, each record an `IRHeader` with the label `[4, 5, width, height, cls, xmin, ymin,
xmax, ymax, ...]` (boxes as fractions of the image) and the JPEG. `RecordFileDetection` reads
them as GluonCV's does, without MXNet."""),
    ('code', """CLASSES = ['car', 'dog', 'bus']
write_records('mydata', 'rec', classes=CLASSES, num_train=60, num_val=30, seed=7,
              image_size=(96, 128), max_objects=3, object_size=(0.2, 0.6))
print(sorted(os.listdir('mydata')))
val = RecordFileDetection('mydata/val.rec', classes=CLASSES)
img, label = val[0]
print(len(val), 'validation records; the first:', img.shape, img.dtype)
print('label (xmin, ymin, xmax, ymax, class) in pixels:')
print(np.round(label, 1))"""),
    ('md', """## 3. `reset_class`: three classes, the shared ones reused

GluonCV's `net.reset_class(CLASSES, reuse_weights=CLASSES)` on the PyTorch network (a list:
the names both lists hold): each output's prediction convolution is rebuilt for three classes,
and the rows of `car`, `dog` and `bus` (VOC classes all three, the first two learnt) are copied
with their anchors' box and objectness rows. Before any fine-tuning the network already finds
the shapes it learnt, under their new class numbers."""),
    ('code', """net = yolo3.get_yolov3('yolo3_mobilenet0.25_voc')
print(yolo3.load_params(net, 'zoo/yolo3_mobilenet0.25_voc_best.params').format())
mapping = net.reset_class(CLASSES, reuse_weights=CLASSES)
print('reused {new index: VOC index}:', mapping)
before = [detect(net, val[k][0], torch.device('cpu'), 64) for k in range(4)]
path = draw_samples([(val[k][0], val[k][1][:, :4], before[k]) for k in range(4)], CLASSES,
                    'before.png', thresh=0.3, max_boxes=3, title='after reset_class, before fine-tuning')
display(Image(filename=path))"""),
    ('md', """## 4. Fine-tuning from the command line

The same in one command, as a user types it: `--transfer FILE --transfer-classes ...` (or a
zoo name), `--dataset rec`. The log's head says what was loaded and reused."""),
    ('code', """tic = time.time()
tuned = train(COMMON + ['--dataset', 'rec', '--dataset-root', 'mydata', '--classes', ','.join(CLASSES),
                              '--transfer', 'zoo/yolo3_mobilenet0.25_voc_best.params',
                              '--transfer-classes', ','.join(VOC_CLASSES),
                              '--epochs', '4', '--lr-decay-epoch', '3', '--save-prefix', 'tuned/'])
print('fine-tuned in {:.0f} s'.format(time.time() - tic))
log = open('tuned/yolo3_mobilenet0.25_rec_train.log').read().splitlines()
print('\\n'.join(line for line in log if line.startswith(('loaded', 'reset_class'))))
records = read_metrics('tuned/yolo3_mobilenet0.25_rec_metrics.jsonl')
for r in records:
    print('epoch', r['epoch'], 'mAP {:.3f}'.format(r['val']['mAP']))
assert any(line.startswith('reset_class: 3 classes (car,dog,bus)') for line in log)"""),
    ('code', """# the run's curves: losses, LR and the validation mAP of every epoch
display(Image(filename='tuned/yolo3_mobilenet0.25_rec_curves.png'))"""),
    ('md', """## 5. After

The fine-tuned network on the same validation images, and the mAP beside a run of the same
length from scratch."""),
    ('code', """after_net = yolo3.get_yolov3('yolo3_mobilenet0.25_custom', CLASSES)
yolo3.load_params(after_net, 'tuned/yolo3_mobilenet0.25_rec_best.params')
after = [detect(after_net, val[k][0], torch.device('cpu'), 64) for k in range(4)]
path = draw_samples([(val[k][0], val[k][1][:, :4], after[k]) for k in range(4)], CLASSES,
                    'after.png', thresh=0.3, max_boxes=3, title='after 4 epochs of fine-tuning')
display(Image(filename=path))"""),
    ('code', """scratch = train(COMMON + ['--dataset', 'rec', '--dataset-root', 'mydata', '--classes',
                                ','.join(CLASSES), '--epochs', '4', '--lr-decay-epoch', '3',
                                '--save-prefix', 'scratch/', '--no-plots'])
print('VOC07 mAP after 4 epochs: fine-tuned {:.3f}, from scratch {:.3f}'.format(tuned.best,
                                                                              scratch.best))
assert tuned.best > scratch.best"""),
]


if __name__ == '__main__':
    main(CELLS, os.path.join(HERE, 'yolov3_finetune.ipynb'))
