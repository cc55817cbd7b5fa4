"""ONNX export of the PyTorch YOLOv3 with its decoding, before NMS.

The exported graph returns what GluonCV's ``YOLOOutputV3`` computes before ``box_nms``: every
anchor's corner box in input pixels and its per-class scores (sigmoid(class) x
sigmoid(objectness)), the three heads concatenated deep first. NMS stays outside the graph:
MXNet's ``box_nms`` (top-k before, per class, its tie order, ``post_nms`` after) has no ONNX
operator with the same results, so the caller runs it (``gluontrain.torch.ops.box_nms`` on
:func:`nms_rows`, or ONNX's ``NonMaxSuppression``, whose scores layout ``(B, C, N)`` is
``scores.transpose(1, 2)``, with its own semantics).
"""
import argparse
import importlib.util
import os

import torch
from torch import nn

from ...core.checkpoint import atomic_save_file
from ..distributed import unwrap_model
from .model import eval_mode

__all__ = ['DecodedYOLOV3', 'export_onnx', 'export_main', 'nms_rows', 'OUTPUT_NAMES']

#: the exported graph's input and outputs
INPUT_NAME, OUTPUT_NAMES = 'data', ('boxes', 'scores')


class DecodedYOLOV3(nn.Module):
    """A YOLOv3 returning ``(boxes (B, N, 4), scores (B, N, C))`` before NMS, in eval mode.

    Parameters
    ----------
    net : YOLOV3
    """

    def __init__(self, net):
        super().__init__()
        self.net = unwrap_model(net)

    def forward(self, x):  # pylint: disable=missing-function-docstring
        boxes, scores = [], []
        for out, pred in zip(self.net.yolo_outputs, self.net.predictions(x)):
            dec = out.decode(pred)
            # (B, H*W, A, k) -> (B, H*W*A, k); flatten, not reshape(B, -1, k), which the
            # TorchScript exporter writes with a wrong target shape
            boxes.append(dec['bbox'].flatten(1, 2))
            scores.append(dec['class_score'].flatten(1, 2))
        return torch.cat(boxes, dim=1), torch.cat(scores, dim=1)


def nms_rows(boxes, scores):
    """Rows ``(B, C * N, 6)`` of ``(class id, score, x1, y1, x2, y2)``, class-major, from the
    exported outputs: the input of ``box_nms`` (:meth:`YOLOV3.nms` takes them).

    The model's own rows are class-major within each head; across heads these are ordered
    differently, which changes only which of two equal scores ``box_nms`` keeps first.
    """
    b, n, c = scores.shape
    ids = torch.arange(c, dtype=scores.dtype, device=scores.device)
    ids = ids.reshape(1, c, 1, 1).expand(b, c, n, 1)
    return torch.cat([ids, scores.transpose(1, 2)[..., None],
                      boxes[:, None].expand(b, c, n, 4)], dim=-1).reshape(b, -1, 6)


def export_onnx(net, path, data_shape=416, batch_size=1, opset_version=17):
    """Write ``net`` with its decoding (not NMS) as an ONNX file, atomically.

    Parameters
    ----------
    net : YOLOV3 (DDP-wrapped or not)
    path : str
        The ``.onnx`` file.
    data_shape, batch_size : int
        The input's fixed side and batch (the decoding's reshapes are traced with the sizes
        of this input; export once per size, as an MXNet exported graph is).
    opset_version : int

    Returns
    -------
    str
        ``path``. Inputs ``data`` ``(B, 3, H, W)`` float32, normalised as the validation
        transform does; outputs ``boxes`` ``(B, N, 4)`` and ``scores`` ``(B, N, C)``.

    Raises
    ------
    ValueError
        When the ``onnx`` package (which ``torch.onnx.export`` needs) is not installed.
    """
    if importlib.util.find_spec('onnx') is None:
        raise ValueError('torch.onnx.export needs the onnx package: pip install onnx (the '
                         "'onnx' extra of gluontrain)")
    model = DecodedYOLOV3(net)
    param = next(model.net.parameters())
    x = torch.zeros(batch_size, 3, data_shape, data_shape, dtype=param.dtype,
                    device=param.device)
    with eval_mode(model.net):
        # the TorchScript exporter: the dynamo one also needs onnxscript
        atomic_save_file(os.fspath(path), lambda tmp: torch.onnx.export(
            model, (x,), tmp, input_names=[INPUT_NAME], output_names=list(OUTPUT_NAMES),
            opset_version=opset_version, dynamo=False))
    return path


def export_main(argv=None):
    """``scripts/export_yolov3.py``: a trained YOLOv3's ``.params`` (either backend's or
    GluonCV's) to an ONNX file with its decoding; returns the file written.

    Arguments: ``--network``, ``--dataset``, ``--classes`` and ``--params`` as the demo and
    evaluation scripts take them, ``--data-shape`` and ``--batch-size`` (fixed in the graph)
    and ``--out`` (default ``yolo3_<network>_<dataset>.onnx``).
    """
    # pylint: disable=import-outside-toplevel
    from ...core.argtypes import positive_size
    from ...yolo3.infer import data_shape_type, dataset_classes
    from ...yolo3.infer_checks import check_output_file, check_weights_inputs
    from .infer import load_net
    p = argparse.ArgumentParser(description='Export a trained YOLOv3 to ONNX, decoding '
                                'included and NMS left out (docs/from_gluoncv.md, "ONNX")')
    p.add_argument('--network', type=str, default='darknet53')
    p.add_argument('--dataset', type=str, default='voc', help='voc, coco, or custom')
    p.add_argument('--classes', type=str, default='', help='custom data: class names in order')
    p.add_argument('--params', type=str, required=True,
                   help='.params written by either backend or by GluonCV')
    p.add_argument('--data-shape', type=data_shape_type, default=416,
                   help='square input side, a multiple of 32')
    p.add_argument('--batch-size', type=positive_size, default=1)
    p.add_argument('--out', type=str, default='', help='the .onnx file')
    args = p.parse_args(argv)
    classes = dataset_classes(args.dataset, args.classes)
    out = args.out or 'yolo3_{}_{}.onnx'.format(args.network, args.dataset)
    check_weights_inputs(args, lambda _value: False)
    check_output_file(out, '--out')
    reports = []
    net = load_net(args.network, args.dataset, classes, torch.device('cpu'), args.params,
                   reports=reports)
    print('\n'.join(reports))
    export_onnx(net, out, args.data_shape, args.batch_size)
    print('wrote {} (input data (B, 3, {s}, {s}); outputs boxes, scores; NMS not included)'
          .format(out, s=args.data_shape))
    return out
