"""Train YOLOv3 with random shapes: GluonCV's train_yolo3.py, through gluontrain.

Example: python scripts/train_yolov3.py --network mobilenet0.25 --dataset synthetic --gpus ''
Same as: gluontrain train yolo3 [arguments]
--resume takes a {prefix}_last.ckpt checkpoint or a .params file (GluonCV's own, unchanged);
what loaded is logged ("loaded N of M tensors from FILE"), and a file that does not fit is one
"error: ..." line naming it, what it looks like and what to pass instead.
"""
import sys

from gluontrain.__main__ import main

if __name__ == '__main__':
    sys.exit(main(['train', 'yolo3'] + sys.argv[1:]))
