"""Detect with a trained YOLOv3: annotated pictures and detections.json.

Example: python scripts/demo_yolov3.py --network darknet53 --dataset voc --params yolo3_darknet53_voc_best.params --data-shape 416 --out out img1.jpg img2.jpg
(or --symbol model-symbol.json --exported-params model-0000.params instead of --params;
GluonCV's own .params load unchanged, --pretrained FILE as in its demo_yolo.py, with a
"loaded N of M tensors" report; a file that does not fit is one "error: ..." line)
"""
import sys

from gluontrain.mx.yolo3.infer_cli import cli, demo_main

if __name__ == '__main__':
    sys.exit(cli(demo_main, sys.argv[1:]))
