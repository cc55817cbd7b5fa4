"""Train the two-stage detector as mapillary/seamseg's scripts/train_detection.py does,
through gluontrain.

Example: python scripts/train_detection.py --log_dir runs/frcnn \
             gluontrain/torch/frcnn/configs/synthetic_cpu.ini DATA_ROOT
Distributed: torchrun --nproc_per_node N scripts/train_detection.py --log_dir DIR CONFIG DATA
Same as: gluontrain train frcnn [arguments]
"""
import sys

from gluontrain.__main__ import main

if __name__ == '__main__':
    sys.exit(main(['train', 'frcnn'] + sys.argv[1:]))
