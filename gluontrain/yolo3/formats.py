"""``--dataset rec`` and ``--dataset lst``: GluonCV's custom-data formats for the YOLOv3 recipe.

GluonCV's "Prepare custom datasets for object detection" tutorial writes ``train.lst`` /
``val.lst`` (and, with ``im2rec.py --pack-label``, ``train.rec`` + ``.idx`` / ``val.rec`` +
``.idx``) and reads them with ``LstDetection`` / ``RecordFileDetection``. Here a folder holding
that pair is read by :mod:`gluontrain.data.custom_detection` (no MXNet; the same items), with
``--classes`` naming class ids 0, 1, ... in order.
"""
import os

from ..data.checks import DatasetError
from ..data.custom_detection import LstDetection, RecordFileDetection
from .args import class_names

__all__ = ['FORMATS', 'record_datasets']

#: --dataset: (file extension, reader)
FORMATS = {'rec': ('.rec', RecordFileDetection), 'lst': ('.lst', LstDetection)}


def record_datasets(name, args):
    """The training and validation datasets of ``--dataset rec`` / ``lst`` and their classes.

    Sets ``args.classes`` (cleaned). Raises ``ValueError`` (no ``--classes`` or no
    ``--dataset-root``) or :class:`~gluontrain.data.checks.DatasetError` (a missing file, a
    malformed one), each one line naming the file or argument and the fix.

    Returns
    -------
    (train_dataset, val_dataset, classes)
    """
    ext, reader = FORMATS[name]
    if not getattr(args, 'classes', ''):
        raise ValueError('--dataset {} needs --classes: the names of class ids 0, 1, ... in '
                         'order (the ids written in the labels)'.format(name))
    classes = class_names(args.classes)
    args.classes = ','.join(classes)
    root = os.path.expanduser(getattr(args, 'dataset_root', None) or '')
    if not root:
        raise ValueError('--dataset {0} needs --dataset-root: the folder holding train{1} and '
                         'val{1}'.format(name, ext))
    splits = []
    for split in ('train', 'val'):
        path = os.path.join(root, split + ext)
        if not os.path.isfile(path):
            raise DatasetError('{} does not exist: --dataset {} reads train{} and val{} from '
                               '--dataset-root (GluonCV\'s im2rec.py / "Prepare custom '
                               'datasets" names)'.format(path, name, ext, ext))
        splits.append(reader(path, classes=classes) if name == 'rec'
                      else reader(path, root=root, classes=classes))
    return splits[0], splits[1], classes
