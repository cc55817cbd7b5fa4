"""Evaluate a trained YOLOv3 with the recipe's validate, beside the GluonCV model-zoo numbers.

Example: python scripts/eval_yolov3.py --network darknet53 --dataset voc --dataset-root ~/data/VOCdevkit --params yolo3_darknet53_voc_best.params --data-shape 416 --gpus 0
(or --symbol model-symbol.json --exported-params model-0000.params instead of --params;
GluonCV's own .params load unchanged, --pretrained FILE as in its eval_yolo.py, and the
script prints "loaded N of M tensors from FILE" first; a file that does not fit is one
"error: ..." line)
--backend torch runs it on PyTorch without MXNet: the same arguments and output; --params takes
a .params written by either backend or by GluonCV (an MXNet exported graph is refused)
"""
import sys

from gluontrain.tool_route import script_main

if __name__ == '__main__':
    sys.exit(script_main('eval', sys.argv[1:]))
