"""Pretrain the scene-graph detector as Scene-Graph-Benchmark's tools/detector_pretrain_net.py
does, through gluontrain (recipe 'sgg-detector').

Example: python scripts/pretrain_detector.py --config-file gluontrain/torch/sgg/configs/detector_cpu.yaml \
             --data-dir data/vg OUTPUT_DIR runs/detector
Its OUTPUT_DIR/model_final.pth is the relation training's MODEL.PRETRAINED_DETECTOR_CKPT.
MODEL.WEIGHT: a maskrcnn-benchmark / SGB .pth or a Detectron Caffe2 body .pkl (R-50.pkl,
X-101-32x8d.pkl; catalog:// names are not downloaded), loaded partially and reported
("loaded N of M tensors from FILE"); a file that fills nothing stops with one "error:" line.
Same as: gluontrain train sgg-detector [arguments]
Under torchrun the process group is started here with a timeout ($GLUONTRAIN_DIST_TIMEOUT
seconds, default 600): a rank that stops ends the job in one line naming it, and the job ends
with a barrier and a clean tear-down (docs/distributed.md).
"""
import contextlib
import io
import os
import sys

from gluontrain.__main__ import main
from gluontrain.torch.distributed import run_job


def uses_cuda(argv):
    """Whether the command line's config trains on CUDA (``MODEL.DEVICE``), which picks the
    process group's backend; None when it does not parse (``main`` then says why)."""
    from gluontrain.torch.sgg.args import config_from_args, parse_args
    if os.environ.get('WORLD_SIZE', '1') in ('', '1') or '-h' in argv or '--help' in argv:
        return None     # one process: no group to start
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            cfg = config_from_args(parse_args(argv, 'PyTorch Object Detection Training'))
    except (Exception, SystemExit):  # pylint: disable=broad-except
        return None
    return cfg.MODEL.DEVICE.startswith('cuda')


if __name__ == '__main__':
    ARGV = sys.argv[1:]
    sys.exit(run_job(lambda: main(['train', 'sgg-detector'] + ARGV), use_cuda=uses_cuda(ARGV)))
