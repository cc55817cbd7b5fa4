#!/usr/bin/env python
"""Pretrain the embedded mobilenet0.25 base that README job (a) starts from.

    python scripts/pretrain_shapes_base.py [--out weights] [--work DIR]

GluonCV's YOLOv3 starts from an ImageNet-pretrained base (GluonCV's ``train_imagenet.py`` made
it; ``get_model(..., pretrained_base=True)`` fetches it). Neither ImageNet nor the released
file can be had here, so this script makes the small equivalent job (a) needs: a YOLOv3
(mobilenet0.25, 64 px) trained on generated shapes of the 18 VOC classes that job (a) does not
draw (every class one shape and colour style, docs/datasets.md), of which only the base layers
are kept, in the layout of GluonCV's ImageNet files (``features.N.*``), so that
``--pretrained-base FILE`` loads it as it loads GluonCV's (docs/install.md, "The main job's
mAP": why job (a) needs it).

Writes ``OUT/mobilenet0.25_shapes.params`` (MXNet's NDArray format, read by both backends) and
``OUT/mobilenet0.25_shapes.json`` (how it was made: the command, the data, the detector's
final mAP, the processor, the versions and the file's SHA-1). About 22 minutes on 2 cores.
"""
import argparse
import hashlib
import json
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# the detector run whose base is kept: README job (a)'s settings (network, input size, rate)
# on eight times its images, 20 epochs, GluonCV's weight decay
DATA = {'num_train': 800, 'num_val': 50, 'seed': 5, 'image_size': [160, 256],
        'max_objects': 4, 'object_size': [0.15, 0.6]}
EXCLUDED = ('car', 'dog')  # job (a)'s classes: the base never sees them as classes
TRAIN = ['--network', 'mobilenet0.25', '--dataset', 'voc', '--gpus', '', '--no-pretrained-base',
         '--batch-size', '8', '-j', '0', '--data-shape', '64', '--no-random-shape',
         '--epochs', '20', '--lr', '0.004', '--warmup-epochs', '2', '--lr-decay-epoch', '16,19',
         '--log-interval', '50', '--val-interval', '5', '--save-interval', '0', '--no-plots',
         '--seed', '233']
NAME = 'mobilenet0.25_shapes'


def extract_base(params, out_path):
    """Save the base layers of a trained yolo3_mobilenet0.25 ``params`` file under GluonCV's
    ImageNet names (:func:`gluontrain.mx.yolo3.weights.base_mapping`); returns the count."""
    import mxnet as mx
    from gluontrain.mx._gluoncv import gluoncv  # the shim, before gluoncv's own imports
    from gluontrain.mx.yolo3.weights import base_mapping
    net = gluoncv.model_zoo.get_model('yolo3_mobilenet0.25_voc', pretrained_base=False)
    net.load_parameters(params)
    params_by_name = net._collect_params_with_prefix()
    arrays = {base: params_by_name[key].data() for key, base in base_mapping(net).items()}
    tmp = out_path + '.tmp'
    mx.nd.save(tmp, arrays)
    os.replace(tmp, out_path)
    return len(arrays)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', default=os.path.join(ROOT, 'weights'),
                        help='folder of the .params and .json files (default: weights/)')
    parser.add_argument('--work', default=os.path.join('runs', 'shapes_base'),
                        help='folder of the generated data and the detector run')
    args = parser.parse_args(argv)
    from gluontrain.__main__ import main as gluontrain_main
    from gluontrain.core.devices import processor_name
    from gluontrain.data.synthetic import VOC_CLASSES, write_voc
    classes = [c for c in VOC_CLASSES if c not in EXCLUDED]
    data_root = os.path.join(args.work, 'data')
    write_voc(data_root, classes=classes, years=(2007, 2012), **DATA)
    prefix = os.path.join(args.work, 'run') + os.sep
    command = TRAIN + ['--dataset-root', os.path.join(data_root, 'VOCdevkit'),
                       '--save-prefix', prefix]
    start = time.time()
    status = gluontrain_main(['train', 'yolo3'] + command)
    if status:
        return status
    run = prefix + 'yolo3_mobilenet0.25_voc'
    with open(run + '_best_map.log') as f:  # GluonCV's "{epoch:04d}:\t{map:.4f}" lines
        epoch, best_map = f.read().split()[-2:]
    os.makedirs(args.out, exist_ok=True)
    out_path = os.path.join(args.out, NAME + '.params')
    count = extract_base(run + '_best.params', out_path)
    with open(out_path, 'rb') as f:
        sha1 = hashlib.sha1(f.read()).hexdigest()
    import mxnet
    import numpy
    record = {
        'file': NAME + '.params', 'sha1': sha1, 'tensors': count,
        'made_by': 'scripts/pretrain_shapes_base.py',
        'data': dict(DATA, classes=classes, years=[2007, 2012]),
        'train_arguments': TRAIN,
        'detector_best': {'epoch': int(epoch.rstrip(':')), 'voc07_map': float(best_map),
                          'of': '18 drawn VOC classes, 50 held-out images'},
        'made_on': {'processor': processor_name(), 'python': platform.python_version(),
                    'mxnet': mxnet.__version__, 'numpy': numpy.__version__},
        'seconds': round(time.time() - start),
        'note': 'kernel-dependent floats: the same command on another processor trains a '
                'slightly different base; job (a) loads this file, the same bits everywhere',
    }
    with open(os.path.join(args.out, NAME + '.json'), 'w') as f:
        json.dump(record, f, indent=1)
        f.write('\n')
    print('wrote {} ({} tensors, SHA-1 {})'.format(out_path, count, sha1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
