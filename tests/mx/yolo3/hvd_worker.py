"""One rank of the ``horovodrun -np N --gloo`` YOLOv3 test (test_horovod.py): runs the recipe's
``main`` and records, for the test, which training images this rank read in each epoch and its
parameters before and after training; rank 0 keeps a copy of the checkpoint written after epoch
0 (``epoch0_last.ckpt``) for the resume test.

Usage: python hvd_worker.py OUT_DIR [recipe arguments...]
"""
import glob
import json
import os
import shutil
import sys

import gluontrain.mx  # noqa: F401  (imports gluoncv through the shim, before horovod)
from gluoncv import data as gdata

from gluontrain.core import sharding
import gluontrain.mx.yolo3.recipe  # noqa: F401  (the module, whose train main calls)
from gluontrain.mx.yolo3 import data as yolo_data
yolo_main = sys.modules["gluontrain.mx.yolo3.recipe"]


def run(out_dir, argv):
    seen, epoch, ranks = [], [None], [0]
    set_epoch = sharding.ShardedSampler.set_epoch
    getitem = gdata.VOCDetection.__getitem__
    # the default (fast) loader reads GluonCV's dataset through OpenCVDecoded
    decoded_getitem = yolo_data.OpenCVDecoded.__getitem__
    train = yolo_main.train

    def recording_set_epoch(self, e):
        epoch[0] = e
        if e == 1 and ranks[0] == 0:  # epoch 0's checkpoint is complete (written after it)
            for path in glob.glob(os.path.join(out_dir, '*_last.ckpt')):
                shutil.copyfile(path, os.path.join(out_dir, 'epoch0_last.ckpt'))
        set_epoch(self, e)

    def record(dataset, idx):
        if any(split == 'trainval' for _, split in dataset._splits):
            root, name = dataset._items[idx]
            seen.append([epoch[0], os.path.basename(root), name])

    def recording_getitem(self, idx):
        record(self, idx)
        return getitem(self, idx)

    def recording_decoded_getitem(self, idx):
        record(self._dataset, idx)
        return decoded_getitem(self, idx)

    def saving_train(net, *args, **kwargs):
        comm = kwargs.get('comm', args[5] if len(args) > 5 else None)
        ranks[0] = comm.rank if comm is not None else 0
        net.save_parameters(os.path.join(out_dir, 'start_rank{}.params'.format(ranks[0])))
        state = train(net, *args, **kwargs)
        net.save_parameters(os.path.join(out_dir, 'end_rank{}.params'.format(ranks[0])))
        return state

    sharding.ShardedSampler.set_epoch = recording_set_epoch
    gdata.VOCDetection.__getitem__ = recording_getitem
    yolo_data.OpenCVDecoded.__getitem__ = recording_decoded_getitem
    yolo_main.train = saving_train
    yolo_main.main(argv)
    with open(os.path.join(out_dir, 'seen_rank{}.json'.format(ranks[0])), 'w') as f:
        json.dump(seen, f)


if __name__ == '__main__':
    run(sys.argv[1], sys.argv[2:])
