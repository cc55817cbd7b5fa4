"""GluonCV's YOLOv3 on PyTorch: the networks (:mod:`.model`) and GluonCV ``.params`` weights
in and out without MXNet (:mod:`.weights`). The training recipe comes in a later step."""
from .model import YOLOV3, build_yolov3, get_yolov3
from .weights import load_params, save_params, to_gluon_key, to_torch_key

__all__ = ['YOLOV3', 'build_yolov3', 'get_yolov3', 'load_params', 'save_params',
           'to_gluon_key', 'to_torch_key']
