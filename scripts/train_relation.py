"""Train a scene-graph model as Scene-Graph-Benchmark's tools/relation_train_net.py does,
through gluontrain (recipe 'sgg').

Example (PredCls on the synthetic VG data, CPU):
  python scripts/make_synthetic_data.py vg --root data/vg
  python scripts/train_relation.py --config-file gluontrain/torch/sgg/configs/predcls_motifs_cpu.yaml \
      --data-dir data/vg OUTPUT_DIR runs/predcls
SGCls / SGDet: sgcls_motifs_cpu.yaml / sgdet_motifs_cpu.yaml, the latter with
  MODEL.PRETRAINED_DETECTOR_CKPT runs/detector/model_final.pth (scripts/pretrain_detector.py).
Rerunning the same command resumes from OUTPUT_DIR/last_checkpoint (as SGB).
Distributed: torchrun --nproc_per_node N scripts/train_relation.py --config-file ... OPTS
Same as: gluontrain train sgg [arguments]
"""
import sys

from gluontrain.__main__ import main

if __name__ == '__main__':
    sys.exit(main(['train', 'sgg'] + sys.argv[1:]))
