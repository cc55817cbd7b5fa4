"""Pretrain the scene-graph detector as Scene-Graph-Benchmark's tools/detector_pretrain_net.py
does, through gluontrain (recipe 'sgg-detector').

Example: python scripts/pretrain_detector.py --config-file gluontrain/torch/sgg/configs/detector_cpu.yaml \
             --data-dir data/vg OUTPUT_DIR runs/detector
Its OUTPUT_DIR/model_final.pth is the relation training's MODEL.PRETRAINED_DETECTOR_CKPT.
MODEL.WEIGHT: a maskrcnn-benchmark / SGB .pth or a Detectron Caffe2 body .pkl (R-50.pkl,
X-101-32x8d.pkl; catalog:// names are not downloaded), loaded partially and reported
("loaded N of M tensors from FILE"); a file that fills nothing stops with one "error:" line.
Same as: gluontrain train sgg-detector [arguments]
Under torchrun the recipe starts the process group with a timeout ($GLUONTRAIN_DIST_TIMEOUT
seconds, default 600): a rank that stops ends the job in one line naming it, and the job ends
with a barrier and a clean tear-down (docs/distributed.md).
"""
import sys

from gluontrain.__main__ import main

if __name__ == '__main__':
    sys.exit(main(['train', 'sgg-detector'] + sys.argv[1:]))
