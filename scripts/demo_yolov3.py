"""Detect with a trained YOLOv3: annotated pictures and detections.json.

Example: python scripts/demo_yolov3.py --network darknet53 --dataset voc --params yolo3_darknet53_voc_best.params --data-shape 416 --out out img1.jpg img2.jpg
(or --symbol model-symbol.json --exported-params model-0000.params instead of --params;
GluonCV's own .params load unchanged, --pretrained FILE as in its demo_yolo.py, with a
"loaded N of M tensors" report; a file that does not fit is one "error: ..." line)
--backend torch runs it on PyTorch without MXNet: the same arguments and output; --params takes
a .params written by either backend or by GluonCV (an MXNet exported graph is refused)
"""
import sys

from gluontrain.tool_route import script_main

if __name__ == '__main__':
    sys.exit(script_main('demo', sys.argv[1:]))
