"""Evaluate a trained YOLOv3 with the recipe's validate, beside the GluonCV model-zoo numbers.

Example: python scripts/eval_yolov3.py --network darknet53 --dataset voc --dataset-root ~/data/VOCdevkit --params yolo3_darknet53_voc_best.params --data-shape 416 --gpus 0
(or --symbol model-symbol.json --exported-params model-0000.params instead of --params)
"""
import sys

from gluontrain.mx.yolo3.infer_cli import eval_main

if __name__ == '__main__':
    eval_main(sys.argv[1:])
    sys.exit(0)
