"""Export a trained YOLOv3 to ONNX on PyTorch, its decoding included, NMS left out.

Example: python scripts/export_yolov3.py --network darknet53 --dataset voc --params yolo3_darknet53_voc_best.params --data-shape 416 --out yolo3.onnx
--params takes a .params written by either backend or by GluonCV (no MXNet needed); needs the
onnx package (pip install -e '.[onnx]'); docs/from_gluoncv.md, "ONNX", says what the graph returns
"""
import sys

from gluontrain.torch.yolo3.export import export_main
from gluontrain.yolo3.infer import cli
from gluontrain.tool_route import INTERRUPTED

if __name__ == '__main__':
    sys.exit(cli(export_main, sys.argv[1:], INTERRUPTED['export']))
