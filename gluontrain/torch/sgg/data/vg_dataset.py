"""Scene-Graph-Benchmark's ``VGDataset``: Visual Genome scene graphs as ``(image, BoxList)``.

Same arguments, defaults, splits, filters and random draws as
``maskrcnn_benchmark/data/datasets/visual_genome.py``; the h5 is read by
:func:`gluontrain.data.vg.load_graphs` after :func:`gluontrain.data.vg_checks.check_vg_files`
validated the three files. What is fixed (rows and images paired by position, flipped
targets for flipped images, no ``np.float``/``np.bool``): docs/faithfulness.md,
"Scene-graph data", "Deliberate differences"."""
import json
import os
import random
import warnings
from collections import defaultdict

import numpy as np
import torch
from PIL import Image

from ....data.checks import DatasetError
from ....data.vg_checks import check_vg_files
from ....data.images import (ImageReadError, image_problem, looks_truncated, open_image,
                             warn_size_mismatch)
from ....data.vg import load_graphs
from ...twostage.structures import BoxList

__all__ = ['BOX_SCALE', 'VGDataset', 'load_info', 'load_image_filenames', 'box_filter',
           'get_statistics', 'statistics_dict']

BOX_SCALE = 1024  # the scale of the h5's boxes_1024


class VGDataset(torch.utils.data.Dataset):
    """Visual Genome scene graphs (SGB's ``VGDataset``).

    Parameters
    ----------
    split : {'train', 'val', 'test'}
        ``test`` is h5 ``split == 2``; the first ``num_val_im`` usable ``split == 0`` images are
        ``val``, the rest ``train``.
    img_dir : str
        Folder of ``<image_id>.jpg``.
    roidb_file : str
        ``VG-SGG-with-attri.h5``.
    dict_file : str
        ``VG-SGG-dicts-with-attri.json``.
    image_file : str
        ``image_data.json`` (one entry per h5 image row, same order).
    transforms : callable, optional
        ``transforms(image, target) -> (image, target)``.
    filter_empty_rels : bool
        Drop images without relationships.
    num_im : int
        Use the first ``num_im`` images of the split (-1: all).
    num_val_im : int
        Size of the val carve-out. ``train`` needs more usable ``split == 0`` images than
        this (ValueError otherwise: SGB would give an empty train split).
    filter_duplicate_rels : bool
        In training, keep one random predicate per (subject, object) pair.
    filter_non_overlap : bool
        In training, keep only relationships whose boxes intersect.
    flip_aug : bool
        In training, flip each image left-right with probability 0.5 (targets flipped too).
    custom_eval : bool
        Read plain images from ``custom_path`` (a folder, or a JSON list of paths) instead.
    custom_path : str
        See ``custom_eval``.
    """

    def __init__(self, split, img_dir, roidb_file, dict_file, image_file, transforms=None,
                 filter_empty_rels=True, num_im=-1, num_val_im=5000,
                 filter_duplicate_rels=True, filter_non_overlap=True, flip_aug=False,
                 custom_eval=False, custom_path=''):
        if split not in ('train', 'val', 'test'):
            raise ValueError("split must be 'train', 'val' or 'test', got {!r}".format(split))
        self.split, self.img_dir, self.flip_aug = split, img_dir, flip_aug
        self.roidb_file, self.dict_file, self.image_file = roidb_file, dict_file, image_file
        self.num_val_im, self.transforms = num_val_im, transforms
        self.filter_non_overlap = filter_non_overlap and split == 'train'
        self.filter_duplicate_rels = filter_duplicate_rels and split == 'train'
        _require_file(dict_file, 'dict_file (VG-SGG-dicts-with-attri.json)')
        self.ind_to_classes, self.ind_to_predicates, self.ind_to_attributes = load_info(dict_file)
        self.categories = {i: self.ind_to_classes[i] for i in range(len(self.ind_to_classes))}
        self.custom_eval = custom_eval
        if custom_eval:
            self.get_custom_imgs(custom_path)
            return
        _require_file(roidb_file, 'roidb_file (VG-SGG-with-attri.h5)')
        _require_file(image_file, 'image_file (image_data.json)')
        if not os.path.isdir(img_dir):
            raise FileNotFoundError('img_dir {} does not exist: point it at the VG_100K folder '
                                    'of <image_id>.jpg files.'.format(img_dir))
        image_data = check_vg_files(roidb_file, dict_file, image_file, img_dir)
        if split in ('train', 'val'):
            usable = _usable_train_images(roidb_file, num_im, filter_empty_rels)
            needs = ', with boxes and relationships' if filter_empty_rels else ', with boxes'
            if usable == 0:
                # no num_val_im can help here: say what an image needs to count
                raise DatasetError(
                    '{} has no usable train-split image (split == 0{}): the {} split is empty; '
                    'use a dataset with such images (`python scripts/make_synthetic_data.py vg '
                    '--root DIR` writes one).'.format(roidb_file, needs, split))
            if split == 'train' and 0 < num_val_im and usable <= num_val_im:
                raise ValueError(
                    '{} has {} usable train-split images (split == 0{}), and the first '
                    'num_val_im={} of them are the val split, leaving train empty: pass a '
                    'num_val_im below {} (DATASETS.NUM_VAL_IM).'.format(
                        roidb_file, usable, needs, num_val_im, usable))
        (self.split_mask, self.gt_boxes, self.gt_classes, self.gt_attributes,
         self.relationships) = load_graphs(
             roidb_file, split, num_im, num_val_im=num_val_im, filter_empty_rels=filter_empty_rels,
             filter_non_overlap=self.filter_non_overlap, box_scale=BOX_SCALE)
        if not self.split_mask.any():
            # an empty loader trains forever on nothing or evaluates nothing: say so now
            raise DatasetError(
                'the {} split of {} is empty: no image is left after SGB\'s filters (split == '
                '{}, with boxes{}{}{}); use a dataset whose {} split has such images.'.format(
                    split, roidb_file, 2 if split == 'test' else 0,
                    ', with relationships' if filter_empty_rels else '',
                    ', with overlapping related boxes' if self.filter_non_overlap else '',
                    ', within num_im={}'.format(num_im) if num_im > -1 else '', split))
        self.filenames, self.img_info = load_image_filenames(img_dir, image_data,
                                                             np.flatnonzero(self.split_mask))
        _refuse_truncated(self.filenames, image_file, split)
        _report_boxes_outside(self, split == 'train')

    def __getitem__(self, index):
        if self.custom_eval:
            img = open_image(self.custom_files[index], context='TEST.CUSTUM_PATH')
            target = torch.LongTensor([-1])
        else:
            info = self.img_info[index]
            img = open_image(self.filenames[index], context='image_id {} of {}'.format(
                info.get('image_id'), self.image_file))
            # SGB prints this and goes on; the boxes follow image_data.json's size
            warn_size_mismatch(self.filenames[index], img.size, (info['width'], info['height']),
                               self.image_file, 'its boxes are scaled to the latter')
            # drawn for every image, as SGB does, so the random stream matches
            flip_img = (random.random() > 0.5) and self.flip_aug and (self.split == 'train')
            target = self.get_groundtruth(index, flip_img=flip_img)
            if flip_img:
                img = img.transpose(Image.FLIP_LEFT_RIGHT)
        if self.transforms is not None:
            img, target = self.transforms(img, target)
        return img, target, index

    def get_statistics(self):
        """SGB's ``get_statistics``: frequency statistics of this dataset's training split.

        Returns
        -------
        dict
            See :func:`gluontrain.torch.sgg.data.statistics.statistics_dict`.
        """
        return statistics_dict(self.training_split())

    def training_split(self):
        """The ``train`` split SGB's statistics read: same files and ``num_val_im``,
        ``filter_duplicate_rels=False``, the other arguments at their defaults."""
        return VGDataset('train', self.img_dir, self.roidb_file, self.dict_file, self.image_file,
                         num_val_im=self.num_val_im, filter_duplicate_rels=False)

    def get_custom_imgs(self, path):
        """Read the plain images of ``path`` (a folder, or a JSON list of image paths)."""
        self.custom_files, self.img_info = [], []
        if os.path.isdir(path):
            files = [os.path.join(path, name) for name in os.listdir(path)]
        elif os.path.isfile(path):
            with open(path) as f:
                files = json.load(f)
        else:
            raise FileNotFoundError('custom_path {} is neither a folder of images nor a JSON '
                                    'list of image paths (TEST.CUSTUM_PATH).'.format(path))
        for name in files:
            problem = image_problem(name)
            if problem:
                raise ImageReadError('image {} {} (listed by TEST.CUSTUM_PATH {}): restore it '
                                     'or remove it from there.'.format(name, problem, path))
            with Image.open(name) as img:
                self.custom_files.append(name)
                self.img_info.append({'width': int(img.width), 'height': int(img.height)})

    def get_img_info(self, index):
        """The ``image_data.json`` entry of image ``index`` (``width``, ``height``, ...)."""
        return self.img_info[index]

    def get_groundtruth(self, index, evaluation=False, flip_img=False):
        """The target ``BoxList`` of image ``index``, boxes at the image's size.

        Parameters
        ----------
        index : int
        evaluation : bool
            Keep empty boxes (clipped, not removed) and add ``relation_tuple``
            ``(r, 3)`` int64 (subject, object, predicate).
        flip_img : bool
            Flip the boxes left-right (SGB's ``x -> W - x``).

        Returns
        -------
        BoxList
            ``xyxy`` float32 boxes with ``labels`` ``(N,)``, ``attributes`` ``(N, 10)`` and
            the triplet field ``relation`` ``(N, N)`` int64 (predicate of each ordered pair,
            0 = none).
        """
        info = self.get_img_info(index)
        w, h = info['width'], info['height']
        box = torch.from_numpy(self.gt_boxes[index] / BOX_SCALE * max(w, h)).reshape(-1, 4)
        if flip_img:
            box[:, [0, 2]] = w - box[:, [2, 0]]
        target = BoxList(box, (w, h), 'xyxy')
        target.add_field('labels', torch.from_numpy(self.gt_classes[index]))
        target.add_field('attributes', torch.from_numpy(self.gt_attributes[index]))
        relation = self.relationships[index].copy()
        if self.filter_duplicate_rels:
            all_rel_sets = defaultdict(list)
            for (o0, o1, r) in relation:
                all_rel_sets[(o0, o1)].append(r)
            relation = [(k[0], k[1], np.random.choice(v)) for k, v in all_rel_sets.items()]
            relation = np.array(relation, dtype=np.int32).reshape(-1, 3)
        num_box = len(target)
        relation_map = torch.zeros((num_box, num_box), dtype=torch.int64)
        for i in range(relation.shape[0]):
            s, o = int(relation[i, 0]), int(relation[i, 1])
            # a repeated pair keeps a random one of its predicates
            if relation_map[s, o] == 0 or random.random() > 0.5:
                relation_map[s, o] = int(relation[i, 2])
        target.add_field('relation', relation_map, is_triplet=True)
        if evaluation:
            target = target.clip_to_image(remove_empty=False)
            target.add_field('relation_tuple', torch.LongTensor(np.asarray(relation, np.int64)))
            return target
        return target.clip_to_image(remove_empty=True)

    def __len__(self):
        return len(self.custom_files if self.custom_eval else self.filenames)


def _usable_train_images(roidb_file, num_im, filter_empty_rels):
    """How many ``split == 0`` images the train/val carve-out divides (SGB's order of filters)."""
    import h5py  # pylint: disable=import-outside-toplevel

    with h5py.File(roidb_file, 'r') as f:
        mask = (f['split'][:] == 0) & (f['img_to_first_box'][:] >= 0)
        if filter_empty_rels:
            mask &= f['img_to_first_rel'][:] >= 0
    n = int(mask.sum())
    return min(n, num_im) if num_im > -1 else n


def _report_boxes_outside(dataset, training):
    """Warn about boxes with no pixel inside their image (``clip_to_image`` empties them:
    training drops them, evaluation keeps them degenerate, as SGB); refuse a training image
    left with no box, which would reach the model as an image with nothing to pool."""
    outside, empty = [], []
    for k, boxes in enumerate(dataset.gt_boxes):
        info = dataset.img_info[k]
        w, h = info['width'], info['height']
        b = np.asarray(boxes, np.float64).reshape(-1, 4) / BOX_SCALE * max(w, h)
        x1, x2 = b[:, 0].clip(0, w - 1), b[:, 2].clip(0, w - 1)
        y1, y2 = b[:, 1].clip(0, h - 1), b[:, 3].clip(0, h - 1)
        gone = np.flatnonzero(~((x2 > x1) & (y2 > y1)))
        row = int(np.flatnonzero(dataset.split_mask)[k])
        for j in gone:
            outside.append('image_id {} (h5 row {}) box #{}'.format(info.get('image_id'), row, j))
        if len(gone) and len(gone) == len(b):
            empty.append('image_id {} (h5 row {})'.format(info.get('image_id'), row))
    if training and empty:
        raise DatasetError('{}: every box of {} training image{} lies outside its image ({}{}), '
                           'so nothing is left to train on: fix the boxes or image sizes in {}, '
                           'or drop the image{}.'.format(
                               dataset.roidb_file, len(empty), '' if len(empty) == 1 else 's',
                               ', '.join(empty[:5]), ', ...' if len(empty) > 5 else '',
                               dataset.image_file, '' if len(empty) == 1 else 's'))
    if outside:
        warnings.warn('{}: {} box{} of the {} split lie{} wholly outside {} image ({}{}); {}.'
                      .format(dataset.roidb_file, len(outside), '' if len(outside) == 1 else 'es',
                              dataset.split, 's' if len(outside) == 1 else '',
                              'its' if len(outside) == 1 else 'their',
                              ', '.join(outside[:5]), ', ...' if len(outside) > 5 else '',
                              'training drops them, as SGB' if training else
                              'evaluation keeps them clipped to a line, as SGB'))


def _require_file(path, what):
    if not os.path.isfile(path):
        raise FileNotFoundError('{} {} does not exist: point it at the file (a generated '
                                'dataset: `python scripts/make_synthetic_data.py vg --root '
                                'DIR`).'.format(what, path))


def load_info(dict_file, add_bg=True):
    """Class, predicate and attribute names by index (SGB's ``load_info``).

    Parameters
    ----------
    dict_file : str
        ``VG-SGG-dicts-with-attri.json``.
    add_bg : bool
        Put ``'__background__'`` at index 0.

    Returns
    -------
    tuple of list of str
        ``ind_to_classes, ind_to_predicates, ind_to_attributes``.
    """
    with open(dict_file) as f:
        try:
            info = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError('{} is not valid JSON ({}): regenerate it.'.format(dict_file, e))
    out = []
    for key in ('label_to_idx', 'predicate_to_idx', 'attribute_to_idx'):
        if key not in info:
            raise ValueError('{} lacks {!r}: it is not a VG-SGG dicts file.'.format(dict_file, key))
        mapping = dict(info[key])
        if add_bg:
            mapping['__background__'] = 0
        out.append(sorted(mapping, key=lambda k, m=mapping: m[k]))
    return tuple(out)


def load_image_filenames(img_dir, image_data, rows=None):
    """Image paths and ``image_data.json`` entries of the given h5 rows.

    Parameters
    ----------
    img_dir : str
        Folder of ``<image_id>.jpg``.
    image_data : list of dict
        Entries aligned with the h5 rows (``vg_checks.check_vg_files``).
    rows : sequence of int, optional
        The rows to return (default all).

    Returns
    -------
    filenames : list of str
    img_info : list of dict

    Raises
    ------
    FileNotFoundError
        For the first missing image (SGB silently skipped it, misaligning later rows).
    """
    rows = range(len(image_data)) if rows is None else rows
    fns = [os.path.join(img_dir, '{}.jpg'.format(image_data[i]['image_id'])) for i in rows]
    for i, filename in zip(rows, fns):
        if not os.path.exists(filename):
            raise FileNotFoundError('image {} (h5 row {}) is missing: restore it or regenerate '
                                    'the dataset.'.format(filename, i))
    return fns, [image_data[i] for i in rows]


def box_filter(boxes, must_overlap=False):
    """Ordered pairs ``(i, j)``, ``i != j``, of possible relations (SGB's ``box_filter``).

    With ``must_overlap`` only pairs whose boxes intersect (exclusive edges); all pairs when
    none do.
    """
    boxes = boxes.astype(float)
    # a positive intersection area: both sides of the intersection positive
    overlaps = (np.minimum(boxes[:, None, 2:], boxes[None, :, 2:])
                > np.maximum(boxes[:, None, :2], boxes[None, :, :2])).all(-1)
    np.fill_diagonal(overlaps, 0)
    pairs = overlaps if must_overlap and overlaps.any() else ~np.eye(len(overlaps), dtype=bool)
    return np.column_stack(np.where(pairs))


def get_statistics(train_data, must_overlap=True):
    """Count subject-object-predicate triplets and candidate pairs (SGB's ``get_VG_statistics``).

    Parameters
    ----------
    train_data : VGDataset
        The training split as SGB builds it for statistics (``filter_duplicate_rels=False``;
        ``VGDataset.training_split()``).
    must_overlap : bool
        Background pairs are the ordered pairs of boxes that intersect (exclusive edges), or
        every ordered pair of an image where none do; all ordered pairs when False.

    Returns
    -------
    fg_matrix : numpy.ndarray
        ``(C, C, P)`` int64, ``fg[s, o, p]`` = annotated relations with subject class ``s``,
        object class ``o`` and predicate ``p`` (duplicates counted).
    bg_matrix : numpy.ndarray
        ``(C, C)`` int64 counts of candidate pairs by class (annotated or not).
    """
    num_obj_classes = len(train_data.ind_to_classes)
    num_rel_classes = len(train_data.ind_to_predicates)
    fg_matrix = np.zeros((num_obj_classes, num_obj_classes, num_rel_classes), dtype=np.int64)
    bg_matrix = np.zeros((num_obj_classes, num_obj_classes), dtype=np.int64)
    for classes, rels, boxes in zip(train_data.gt_classes, train_data.relationships,
                                    train_data.gt_boxes):
        np.add.at(fg_matrix, (classes[rels[:, 0]], classes[rels[:, 1]], rels[:, 2]), 1)
        pairs = box_filter(boxes, must_overlap=must_overlap)
        np.add.at(bg_matrix, (classes[pairs[:, 0]], classes[pairs[:, 1]]), 1)
    return fg_matrix, bg_matrix


def statistics_dict(train_data, must_overlap=True):
    """SGB's statistics dict from the training split.

    ``bg_matrix + 1`` becomes predicate 0 of ``fg_matrix`` and
    ``pred_dist = log(fg / sum_p fg + 1e-3)``.

    Parameters
    ----------
    train_data : VGDataset
        See :func:`get_statistics`.
    must_overlap : bool
        See :func:`get_statistics`.

    Returns
    -------
    dict
        ``fg_matrix`` (int64 tensor ``(C, C, P)``, background column filled), ``pred_dist``
        (float32 tensor ``(C, C, P)``), ``obj_classes``, ``rel_classes``, ``att_classes``
        (lists of names, ``'__background__'`` first).
    """
    fg_matrix, bg_matrix = get_statistics(train_data, must_overlap=must_overlap)
    fg_matrix[:, :, 0] = bg_matrix + 1
    pred_dist = np.log(fg_matrix / fg_matrix.sum(2)[:, :, None] + 1e-3)
    return {'fg_matrix': torch.from_numpy(fg_matrix),
            'pred_dist': torch.from_numpy(pred_dist).float(),
            'obj_classes': list(train_data.ind_to_classes),
            'rel_classes': list(train_data.ind_to_predicates),
            'att_classes': list(train_data.ind_to_attributes)}


def _refuse_truncated(filenames, image_file, split):
    """Refuse the split's JPEGs that are cut short, before training: PIL (SGB's reader)
    refuses one when it decodes it, which may be hours into the run when the sampler first
    draws it. Reads the first and last bytes of each file only (no decoding)."""
    bad = [f for f in filenames if looks_truncated(f)]
    if bad:
        one, it = len(bad) == 1, 'it' if len(bad) == 1 else 'them'
        raise ImageReadError('{} image{} of the {} split {} truncated (no JPEG end marker): {}{} '
                             '(listed by {}); restore {}, or drop {} from the dataset'.format(
                                 len(bad), '' if one else 's', split, 'is' if one else 'are',
                                 ', '.join(bad[:3]), ', ...' if len(bad) > 3 else '',
                                 image_file, it, it))
