"""Train YOLOv3 with random shapes: GluonCV's train_yolo3.py, through gluontrain.

Example: python scripts/train_yolov3.py --network mobilenet0.25 --dataset synthetic --gpus ''
"""
import sys

from gluontrain.mx.yolo3 import main

if __name__ == '__main__':
    try:
        main(sys.argv[1:])
    except (ValueError, FileNotFoundError) as e:
        sys.exit('error: {}'.format(e))
