"""Propose YOLOv3 anchors for a dataset: k-means on 1 - IoU of its training boxes' shapes.

Example: python scripts/propose_anchors.py --dataset custom --dataset-root my_voc --data-shape 416
reads the training boxes as the yolo3 recipe reads them (VOC format: --dataset voc, custom or
synthetic), scaled to the --data-shape x --data-shape input GluonCV's train transform resizes
every image to, and prints the mean best IoU of GluonCV's anchors and of the proposed ones,
then the --anchors to train with (scripts/train_yolov3.py ... --anchors 'W,H,...;...;...').
"""
import argparse
import sys

from gluontrain.core.argtypes import non_negative_int
from gluontrain.data.classes import VOC_CLASSES
from gluontrain.yolo3.anchors import (GLUONCV_ANCHORS, anchors_text, mean_best_iou,
                                      propose_anchors, voc_boxes_wh)
from gluontrain.yolo3.data import VOCDetection, voc_folders
from gluontrain.yolo3.infer import cli, data_shape_type


def parser():
    """The script's arguments."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a = p.add_argument
    a('--dataset', type=str, default='voc', choices=('voc', 'custom', 'synthetic'),
      help='VOC-format training data, read as the yolo3 recipe reads it (its training splits)')
    a('--dataset-root', type=str, default=None, help='as in training')
    a('--classes', type=str, default='', help='custom data: class names (default: all found)')
    a('--data-shape', type=data_shape_type, default=416,
      help='the network input the anchors are for (training --data-shape)')
    a('--seed', type=non_negative_int, default=0, help='k-means seed')
    return p


def main(argv=None):
    """Print the two mean best IoUs and the ``--anchors`` text; returns that text."""
    args = parser().parse_args(argv)
    root, train_splits, _, classes = voc_folders(args.dataset, args)
    dataset = VOCDetection(root, train_splits, classes or VOC_CLASSES, classes is not None)
    boxes = voc_boxes_wh(dataset, args.data_shape)
    if not len(boxes):
        raise ValueError('{}: the training splits hold no boxes to fit anchors to'.format(root))
    proposed = anchors_text(propose_anchors(boxes, 9, args.seed))
    print('{} training boxes in {} images of {}, at {} x {} pixels'.format(
        len(boxes), len(dataset), root, args.data_shape, args.data_shape))
    print("mean best IoU, GluonCV's anchors: {:.4f}".format(
        mean_best_iou(boxes, GLUONCV_ANCHORS)))
    print('mean best IoU, proposed anchors:  {:.4f}'.format(mean_best_iou(boxes, proposed)))
    print("--anchors '{}'".format(proposed))  # quoted: ';' ends a shell command
    return proposed


if __name__ == '__main__':
    sys.exit(cli(main))
