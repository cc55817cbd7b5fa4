"""Detect with a trained YOLOv3: annotated pictures and detections.json.

Example: python scripts/demo_yolov3.py --network darknet53 --dataset voc --params yolo3_darknet53_voc_best.params --data-shape 416 --out out img1.jpg img2.jpg
(or --symbol model-symbol.json --exported-params model-0000.params instead of --params)
"""
import sys

from gluontrain.mx.yolo3.infer_cli import demo_main

if __name__ == '__main__':
    demo_main(sys.argv[1:])
    sys.exit(0)
