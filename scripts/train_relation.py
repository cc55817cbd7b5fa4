"""Train a scene-graph model as Scene-Graph-Benchmark's tools/relation_train_net.py does,
through gluontrain (recipe 'sgg').

Example (PredCls on the synthetic VG data, CPU):
  python scripts/make_synthetic_data.py vg --root data/vg
  python scripts/train_relation.py --config-file gluontrain/torch/sgg/configs/predcls_motifs_cpu.yaml \
      --data-dir data/vg OUTPUT_DIR runs/predcls
SGCls / SGDet: sgcls_motifs_cpu.yaml / sgdet_motifs_cpu.yaml, the latter with
  MODEL.PRETRAINED_DETECTOR_CKPT runs/detector/model_final.pth (scripts/pretrain_detector.py).
Rerunning the same command resumes from OUTPUT_DIR/last_checkpoint (as SGB).
Weights loaded are reported ("loaded N of M tensors from FILE", the keys left at their initial
values grouped, and "roi_heads.relation.box_feature_extractor.* <- roi_heads.box.feature_extractor.*
(K tensors)" for SGB's load_mapping); a checkpoint written by SGB itself loads unchanged. A file
that fills nothing, a seamseg / two-stage (frcnn) snapshot, tensors of other shapes, or a resume
that does not fill the whole model stop with one "error:" line naming the file and the fix.
Distributed: torchrun --nproc_per_node N scripts/train_relation.py --config-file ... OPTS
Same as: gluontrain train sgg [arguments]
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
            cfg = config_from_args(parse_args(argv, 'PyTorch Relation Detection Training'))
    except (Exception, SystemExit):  # pylint: disable=broad-except
        return None
    return cfg.MODEL.DEVICE.startswith('cuda')


if __name__ == '__main__':
    ARGV = sys.argv[1:]
    sys.exit(run_job(lambda: main(['train', 'sgg'] + ARGV), use_cuda=uses_cuda(ARGV)))
