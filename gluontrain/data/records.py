"""The generated detection scenes in GluonCV's custom-data formats: ``.lst`` + images, or
``.rec`` + ``.idx`` (what ``im2rec.py --pack-label --pass-through`` writes from such a list).

:func:`write_records` draws a VOC-format set with :func:`gluontrain.data.synthetic.write_voc`
and writes its ``trainval`` images as ``train.*`` and its ``test`` images as ``val.*``, each
object as GluonCV's tutorial writes it: header ``[4, 5, width, height]``, then ``cls, xmin,
ymin, xmax, ymax`` normalised by the image size (VOC's 1-based corners minus 1, as GluonCV's
VOC reader takes them), class ids in the order of ``classes``.
"""
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET

from . import synthetic
from .classes import VOC_CLASSES
from .recordio import IRHeader, IndexedRecordWriter, detection_label, lst_line, pack

__all__ = ['write_records']


def _objects(xml_path, classes):
    root = ET.parse(xml_path).getroot()
    size = root.find('size')
    width, height = int(size.find('width').text), int(size.find('height').text)
    boxes, ids = [], []
    for obj in root.iter('object'):
        box = obj.find('bndbox')
        boxes.append([float(box.find(k).text) - 1 for k in ('xmin', 'ymin', 'xmax', 'ymax')])
        ids.append(list(classes).index(obj.find('name').text.strip()))
    return width, height, boxes, ids


def write_records(root, fmt='rec', classes=None, **voc_kwargs):
    """Write ``train`` and ``val`` of a generated detection set under ``root`` in ``fmt``.

    Parameters
    ----------
    root : str
        Output folder (``--dataset-root`` of ``--dataset rec`` / ``lst``).
    fmt : {'rec', 'lst'}
    classes : sequence of str, optional
        The VOC classes drawn (default all 20), numbered 0, 1, ... in this order.
    **voc_kwargs
        ``num_train``, ``num_val``, ``seed``, ``image_size``, ``max_objects``, ``object_size``
        of :func:`~gluontrain.data.synthetic.write_voc` (one year, VOC2007).

    Returns
    -------
    str
        ``root``.
    """
    if fmt not in ('rec', 'lst'):
        raise ValueError("fmt must be 'rec' or 'lst', got {!r}".format(fmt))
    classes = list(classes or VOC_CLASSES)
    os.makedirs(root, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        year = os.path.join(synthetic.write_voc(tmp, years=(2007,), classes=classes,
                                                **voc_kwargs), 'VOC2007')
        for split, listed in (('train', 'trainval'), ('val', 'test')):
            with open(os.path.join(year, 'ImageSets', 'Main', listed + '.txt')) as f:
                image_ids = [line.strip() for line in f if line.strip()]
            rows = []
            for index, image_id in enumerate(image_ids):
                width, height, boxes, ids = _objects(
                    os.path.join(year, 'Annotations', image_id + '.xml'), classes)
                label = detection_label(boxes, ids, width, height, header=(width, height))
                rows.append((index, label, os.path.join(year, 'JPEGImages', image_id + '.jpg')))
            if fmt == 'rec':
                with IndexedRecordWriter(os.path.join(root, split + '.rec')) as writer:
                    for index, label, path in rows:
                        with open(path, 'rb') as f:
                            writer.write_idx(index, pack(IRHeader(0, label, index, 0), f.read()))
            else:
                images = os.path.join(root, 'images')
                os.makedirs(images, exist_ok=True)
                with open(os.path.join(root, split + '.lst'), 'w') as f:
                    for index, label, path in rows:
                        name = os.path.join('images', os.path.basename(path))
                        shutil.copyfile(path, os.path.join(root, name))
                        f.write(lst_line(index, label, name))
    return root
