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
Under torchrun the recipe starts the process group with a timeout ($GLUONTRAIN_DIST_TIMEOUT
seconds, default 600): a rank that stops ends the job in one line naming it, and the job ends
with a barrier and a clean tear-down (docs/distributed.md).
"""
import sys

from gluontrain.__main__ import main

if __name__ == '__main__':
    sys.exit(main(['train', 'sgg'] + sys.argv[1:]))
