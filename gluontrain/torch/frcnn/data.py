"""Datasets of the two-stage recipe: seamseg's ISS format and COCO json + images.

Both give seamseg's items: ``ISSTransform`` output (``img``, ``cat``, ``iscrowd``, ``bbx``
in ``(y0, x0, y1, x1)``; ISS also ``msk``) plus ``idx`` (the image id) and ``size`` (the
original ``(H, W)``), and seamseg's dataset interface (``num_stuff``, ``num_thing``,
``categories``, ``original_ids``, ``img_sizes``).

- **ISS** (seamseg/data/dataset.py): ``img/``, ``msk/``, ``lst/<split>.txt``,
  ``metadata.bin``; boxes come from the instance masks.
- **COCO**: ``annotations/instances_<split>.json`` and ``<split>/<file_name>``. The
  categories listed in the json, sorted by id, become the contiguous things ``0 .. C-1``
  (``num_stuff = 0``); ``original_ids[c]`` maps back to the COCO id for evaluation. Crowd
  annotations stay, with ``iscrowd = 1`` (the model uses them as void regions).

:func:`detect_format` tells them apart from the folder.
"""
import json
import math
import os
import warnings

import numpy as np
import torch
import torch.utils.data as data
import umsgpack

from gluontrain.data.checks import GENERATE, DatasetError
from gluontrain.data.images import (ImageMissingError, ImageReadError, open_image,
                                    warn_size_mismatch)

from .sampler import DistributedARBatchSampler
from .transform import ISSTransform, iss_collate_fn

__all__ = ['ISSDataset', 'COCODataset', 'detect_format', 'make_dataset', 'make_transforms',
           'make_dataloaders', 'DatasetError', 'ImageReadError']

def _root(root):
    root = os.path.abspath(os.path.expanduser(root))
    if not os.path.isdir(root):
        raise FileNotFoundError(
            'data root {} does not exist: pass a folder in seamseg ISS format (img/, msk/, '
            'lst/, metadata.bin) or COCO format (annotations/instances_<split>.json and '
            '<split>/), e.g. one written by `{}` or `{}`'.format(
                root, GENERATE.format('iss'), GENERATE.format('coco')))
    return root


def detect_format(root):
    """``'iss'`` or ``'coco'`` from the folder's content.

    Parameters
    ----------
    root : str

    Returns
    -------
    str

    Raises
    ------
    FileNotFoundError
        Missing root.
    DatasetError
        Neither layout.
    """
    root = _root(root)
    if os.path.isfile(os.path.join(root, 'metadata.bin')):
        return 'iss'
    ann = os.path.join(root, 'annotations')
    if os.path.isdir(ann) and any(n.startswith('instances_') and n.endswith('.json')
                                  for n in os.listdir(ann)):
        return 'coco'
    raise DatasetError(
        '{} is neither a seamseg ISS dataset (metadata.bin, img/, msk/, lst/) nor a COCO one '
        '(annotations/instances_<split>.json); found {}'.format(root, sorted(os.listdir(root))))


def _find_image(folder, stem):
    for ext in ('.png', '.jpg'):
        if os.path.exists(os.path.join(folder, stem + ext)):
            return os.path.join(folder, stem + ext)
    raise ImageMissingError('Cannot find any image for id {} in {} (.png or .jpg): restore it '
                            'or remove the id from the split list'.format(stem, folder))


class _Split(data.Dataset):
    """What both formats share: ``_images``, one dict per image with its ``id`` and declared
    ``size``, gives seamseg's ``img_sizes`` and the items' ``idx`` and ``size``."""

    @property
    def num_thing(self):
        """Number of thing categories."""
        return len(self.categories) - self.num_stuff

    @property
    def img_sizes(self):
        """``(H, W)`` of each image, as declared (``metadata.bin``, the json)."""
        return [tuple(d['size']) for d in self._images]

    def __len__(self):
        return len(self._images)

    @staticmethod
    def _item(rec, desc, img):
        rec['idx'] = desc['id']
        rec['size'] = (img.size[1], img.size[0])
        return rec


class ISSDataset(_Split):
    """seamseg's ISS dataset.

    Parameters
    ----------
    root_dir : str
    split_name : str
        A file ``lst/<split_name>.txt``.
    transform : callable
        ``transform(img, msk, cat, iscrowd) -> dict`` (:class:`ISSTransform`).
    """

    def __init__(self, root_dir, split_name, transform):
        super().__init__()
        self.root_dir = _root(root_dir)
        self.split_name, self.transform = split_name, transform
        self._img_dir, self._msk_dir, self._lst_dir = (
            os.path.join(self.root_dir, d) for d in ('img', 'msk', 'lst'))
        for d in (self._img_dir, self._msk_dir, self._lst_dir):
            if not os.path.isdir(d):
                raise DatasetError('Dataset sub-folder {} does not exist: an ISS root holds '
                                   'img/, msk/, lst/ and metadata.bin'.format(d))
        self._meta, self._images = self._load_split()

    def _load_split(self):
        meta_file = os.path.join(self.root_dir, 'metadata.bin')
        try:
            with open(meta_file, 'rb') as f:
                metadata = umsgpack.unpack(f)  # seamseg's call
            meta, images = metadata['meta'], metadata['images']
            meta['num_stuff'], meta['categories']  # pylint: disable=pointless-statement
        except (OSError, ValueError, KeyError, TypeError, umsgpack.UnpackException) as exc:
            raise DatasetError('{} is not a seamseg metadata file ({}: {}): it must be '
                               'MessagePack {{"meta": {{num_stuff, categories, ...}}, "images": '
                               '[...]}}'.format(meta_file, type(exc).__name__, exc)) from None
        lst_file = os.path.join(self._lst_dir, self.split_name + '.txt')
        if not os.path.isfile(lst_file):
            raise DatasetError('split list {} does not exist: set [dataloader] train_set / '
                               'val_set to one of {}'.format(lst_file, sorted(
                                   os.path.splitext(n)[0] for n in os.listdir(self._lst_dir))))
        with open(lst_file) as f:
            lst = set(line.strip() for line in f if line.strip())
        images = [d for d in images if d['id'] in lst]
        missing = lst - {d['id'] for d in images}
        if missing:
            raise DatasetError('{} lists {} ids that metadata.bin does not describe, e.g. {}'
                               .format(lst_file, len(missing), sorted(missing)[:3]))
        for d in images:
            size = d.get('size')
            if not (isinstance(size, (list, tuple)) and len(size) == 2 and all(
                    isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in size)):
                raise DatasetError('{}: image {} has size {!r}; it must be the image\'s (height, '
                                   'width) in pixels'.format(meta_file, d['id'], size))
            if len(d['cat']) != len(d['iscrowd']) or not d['cat']:
                raise DatasetError('{}: image {} has {} cat and {} iscrowd entries; both must '
                                   'list every instance (instance 0 = void)'.format(
                                       meta_file, d['id'], len(d['cat']), len(d['iscrowd'])))
        if images and not any(c >= meta['num_stuff'] and c != 255
                              for d in images for c in d['cat']):
            raise DatasetError('split {} of {} has no thing instance in any image: nothing to '
                               'detect'.format(self.split_name, self.root_dir))
        return meta, images

    @property
    def categories(self):
        """Category names (stuff first)."""
        return self._meta['categories']

    @property
    def num_categories(self):
        """Number of categories."""
        return len(self.categories)

    @property
    def num_stuff(self):
        """Number of stuff categories."""
        return self._meta['num_stuff']

    @property
    def original_ids(self):
        """Original class id of each category."""
        return self._meta['original_ids']

    @property
    def palette(self):
        """Colour of each category."""
        return np.array(self._meta['palette'], dtype=np.uint8)

    @property
    def img_categories(self):
        """Categories of each image's instances."""
        return [d['cat'] for d in self._images]

    @property
    def source(self):
        """The split list file (``lst/<split>.txt``)."""
        return os.path.join(self._lst_dir, self.split_name + '.txt')

    def __getitem__(self, item):
        desc = self._images[item]
        context = 'id {} of {}'.format(desc['id'], self.source)
        img_file = _find_image(self._img_dir, desc['id'])
        img = open_image(img_file, context=context)
        msk_file = os.path.join(self._msk_dir, desc['id'] + '.png')
        msk_files, i = [msk_file], 1
        while os.path.exists('{}.{}'.format(msk_file, i)):
            msk_files.append('{}.{}'.format(msk_file, i))
            i += 1
        msk = [open_image(path, None, context) for path in msk_files]
        for path, m in zip(msk_files, msk):
            if m.size != img.size:
                # seamseg would take boxes from the mask's pixels: wrong boxes, no word
                raise DatasetError('mask {} is {}x{} but image {} is {}x{} ({}): a mask must '
                                   'match its image; regenerate it'.format(
                                       path, m.size[0], m.size[1], img_file, img.size[0],
                                       img.size[1], context))
        # seamseg batches by metadata.bin's size; the image's own size is what is trained on
        warn_size_mismatch(img_file, img.size, desc['size'][::-1],
                           os.path.join(self.root_dir, 'metadata.bin'),
                           'images are batched by the declared size; fix "size" (H, W)')
        try:
            rec = self.transform(img, msk, desc['cat'], desc['iscrowd'])
        except ValueError as exc:
            raise DatasetError('{}: {}'.format(msk_file, exc)) from None
        finally:
            for m in msk:
                m.close()
        return self._item(rec, desc, img)

    def get_image_desc(self, idx):
        """The metadata entry of image ``idx``."""
        matching = [d for d in self._images if d['id'] == idx]
        if len(matching) != 1:
            raise ValueError('No image found with id %s' % idx)
        return matching[0]


class COCODataset(_Split):
    """COCO json + images with seamseg's item and dataset interface.

    Parameters
    ----------
    root : str
    split_name : str
        ``annotations/instances_<split_name>.json`` and the image folder ``<split_name>/``.
    transform : ISSTransform
        Its :meth:`~ISSTransform.apply_boxes` is used.
    """

    def __init__(self, root, split_name, transform):
        super().__init__()
        self.root = _root(root)
        self.split_name, self.transform = split_name, transform
        self.annotation_file = os.path.join(self.root, 'annotations',
                                            'instances_{}.json'.format(split_name))
        self.image_dir = os.path.join(self.root, split_name)
        self._load()

    def _load(self):
        path = self.annotation_file
        if not os.path.isfile(path):
            raise DatasetError('COCO annotation file {} does not exist: set [dataloader] '
                               'train_set / val_set to a split with annotations/instances_'
                               '<split>.json'.format(path))
        try:
            with open(path) as f:
                js = json.load(f)
        except json.JSONDecodeError as e:
            raise DatasetError('COCO annotation file {} is not valid JSON (line {}, column {}: '
                               '{}): fix or regenerate it'.format(path, e.lineno, e.colno,
                                                                  e.msg)) from None
        missing = [k for k in ('images', 'annotations', 'categories')
                   if not isinstance(js, dict) or not isinstance(js.get(k), list)]
        if missing:
            raise DatasetError('COCO annotation file {} lacks the lists {}'.format(path, missing))
        if not js['categories']:
            raise DatasetError('COCO annotation file {} lists no categories'.format(path))
        images = {}
        for img in js['images']:
            lacking = [k for k in ('id', 'file_name', 'width', 'height') if k not in img]
            if lacking:
                raise DatasetError('{}: image entry {} lacks {}; add them'.format(
                    path, img.get('id', img.get('file_name')), lacking))
            if not all(isinstance(img[k], (int, float)) and not isinstance(img[k], bool)
                       and math.isfinite(img[k]) and img[k] > 0 for k in ('width', 'height')):
                raise DatasetError('{}: image entry {} has width/height {!r}x{!r}; write the '
                                   'image\'s size in pixels'.format(path, img['id'], img['width'],
                                                                    img['height']))
            images[img['id']] = img
        outside = []
        cats = sorted(js['categories'], key=lambda c: c['id'])
        self._cat_to_contiguous = {c['id']: i for i, c in enumerate(cats)}
        self._categories = [c.get('name', str(c['id'])) for c in cats]
        self._original_ids = [c['id'] for c in cats]
        by_image = {img['id']: [] for img in js['images']}
        for ann in js['annotations']:
            where = '{}: annotation id {}'.format(path, ann.get('id'))
            if ann.get('image_id') not in by_image:
                raise DatasetError('{} refers to image_id {} which is not in images'.format(
                    where, ann.get('image_id')))
            if ann.get('category_id') not in self._cat_to_contiguous:
                raise DatasetError('{} has category_id {} which is not in categories'.format(
                    where, ann.get('category_id')))
            where += ' (image {})'.format(ann.get('image_id'))
            bbox = ann.get('bbox')
            if not (isinstance(bbox, list) and len(bbox) == 4 and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in bbox)):
                raise DatasetError('{} has bbox {!r}: it must be four numbers [x, y, width, '
                                   'height]; fix or drop it'.format(where, bbox))
            if not all(math.isfinite(v) for v in bbox):
                # json reads NaN / Infinity; NaN passes every comparison below
                raise DatasetError('{} has the non-finite bbox {}: write pixel numbers or drop '
                                   'the annotation'.format(where, bbox))
            if bbox[2] <= 0 or bbox[3] <= 0:
                raise DatasetError('{} has bbox {!r}: it must be [x, y, width, height] with '
                                   'positive width and height; fix or drop it'.format(where, bbox))
            img = images[ann['image_id']]
            x, y, w, h = bbox
            if x >= img['width'] or y >= img['height'] or x + w <= 0 or y + h <= 0:
                outside.append('annotation id {} (image {}, bbox {}, image {}x{})'.format(
                    ann.get('id'), ann['image_id'], bbox, img['width'], img['height']))
                continue
            by_image[ann['image_id']].append(ann)
        if outside:
            # a box with no pixel in its image cannot be learnt; the rest of the image can
            warnings.warn('{}: {} box{} wholly outside {} image{}, dropped: {}{}'.format(
                path, len(outside), '' if len(outside) == 1 else 'es',
                'its' if len(outside) == 1 else 'their', '' if len(outside) == 1 else 's',
                '; '.join(outside[:5]), '; ...' if len(outside) > 5 else ''))
        if js['images'] and not any(by_image.values()):
            raise DatasetError('COCO annotation file {}: no image has a box{}; nothing to '
                               'detect'.format(path, ' inside it ({} wholly outside)'.format(
                                   len(outside)) if outside else ''))
        self._images = []
        for img in js['images']:
            anns = by_image[img['id']]
            x, y, w, h = (np.array([a['bbox'][k] for a in anns], dtype=np.float32)
                          for k in range(4))
            self._images.append({
                'id': img['id'], 'file_name': img['file_name'],
                'size': (int(img['height']), int(img['width'])),
                'bbx': np.stack([y, x, y + h, x + w], 1) if anns else np.zeros((0, 4), np.float32),
                'cat': [self._cat_to_contiguous[a['category_id']] for a in anns],
                'iscrowd': [int(a.get('iscrowd', 0)) for a in anns]})

    @property
    def categories(self):
        """Category names in contiguous order."""
        return self._categories

    @property
    def num_stuff(self):
        """0: COCO detection has things only."""
        return 0

    @property
    def original_ids(self):
        """COCO category id of each contiguous class."""
        return self._original_ids

    @property
    def img_ids(self):
        """COCO image ids in dataset order."""
        return [d['id'] for d in self._images]

    @property
    def source(self):
        """The annotation file."""
        return self.annotation_file

    def __getitem__(self, item):
        desc = self._images[item]
        path = os.path.join(self.image_dir, desc['file_name'])
        img = open_image(path, context='image id {} of {}'.format(desc['id'],
                                                                   self.annotation_file))
        # the boxes are pixels and stay as written; the declared size only batches
        warn_size_mismatch(path, img.size, desc['size'][::-1],
                           '{} (image id {})'.format(self.annotation_file, desc['id']),
                           'its boxes are used as written; fix width/height')
        rec = self.transform.apply_boxes(img, desc['bbx'], desc['cat'], desc['iscrowd'])
        return self._item(rec, desc, img)


def make_dataset(root, split_name, transform):
    """The dataset of ``root`` in whichever format it has.

    Parameters
    ----------
    root : str
    split_name : str
        ``[dataloader] train_set`` / ``val_set``.
    transform : ISSTransform

    Returns
    -------
    ISSDataset or COCODataset
    """
    if not split_name:
        raise DatasetError('empty split name: set [dataloader] train_set and val_set in the '
                           'configuration (ISS: a lst/<name>.txt; COCO: instances_<name>.json)')
    kind = detect_format(root)
    return (ISSDataset if kind == 'iss' else COCODataset)(root, split_name, transform)


def make_transforms(dl_config):
    """seamseg's train and validation ``ISSTransform`` from ``[dataloader]``.

    Parameters
    ----------
    dl_config : configparser.SectionProxy

    Returns
    -------
    tuple of ISSTransform
        ``(train, val)``: flip and random scale for training only.
    """
    common = (dl_config.getint('shortest_size'), dl_config.getint('longest_max_size'),
              dl_config.getstruct('rgb_mean'), dl_config.getstruct('rgb_std'))
    return (ISSTransform(*common, dl_config.getboolean('random_flip'),
                         dl_config.getstruct('random_scale')),
            ISSTransform(*common))


def _batch_size(dl_config, key):
    value = dl_config.get(key)
    try:
        size = int(value)
    except (TypeError, ValueError):
        size = 0
    if size < 1:
        raise ValueError('[dataloader] {} = {!r}: seamseg gives it no default; set a positive '
                         'integer in your configuration'.format(key, value))
    return size


def make_dataloaders(config, root, rank=0, world_size=1, reference_shuffle=False,
                     datasets=None, batch_size=None, num_workers=None):
    """seamseg's ``make_dataloader``: the two datasets with their aspect-ratio batch
    samplers (one shard per process; training drops the last incomplete batches, validation
    keeps them) and ``iss_collate_fn``.

    Parameters
    ----------
    config : configparser.ConfigParser
    root : str
        The data root (ISS or COCO).
    rank, world_size : int
    reference_shuffle : bool
        seamseg's compounding shuffle (see :mod:`.sampler`).
    datasets : (Dataset, Dataset), optional
        ``(train, val)`` already built; default: those of ``[dataloader] train_set`` and
        ``val_set`` with :func:`make_transforms`.
    batch_size, num_workers : int, optional
        Default: ``[dataloader] train_batch_size`` and ``num_workers`` (the validation batch
        is always ``val_batch_size``).

    Returns
    -------
    tuple of torch.utils.data.DataLoader
        ``(train, val)``.
    """
    dl = config['dataloader']
    if datasets is None:
        datasets = [make_dataset(root, dl[key], tf)
                    for key, tf in zip(('train_set', 'val_set'), make_transforms(dl))]
    sizes = (batch_size or _batch_size(dl, 'train_batch_size'), _batch_size(dl, 'val_batch_size'))
    workers = dl.getint('num_workers') if num_workers is None else num_workers
    loaders = []
    for split, dataset, size, drop_last in (('train', datasets[0], sizes[0], True),
                                            ('val', datasets[1], sizes[1], False)):
        if len(dataset) == 0:
            # before the batch sampler, whose complaint would be about the batch size (and an
            # empty val split would end the run after training, dividing by its 0 batches)
            raise DatasetError('{} split {!r} of {} has no image ({}): add images to it or set '
                               '[dataloader] {}_set to a split that has some'.format(
                                   split, dl['{}_set'.format(split)], root,
                                   getattr(dataset, 'source', 'its list'), split))
        sampler = DistributedARBatchSampler(dataset, size, world_size, rank, drop_last,
                                            reference_shuffle=reference_shuffle)
        loaders.append(data.DataLoader(dataset, batch_sampler=sampler,
                                       collate_fn=iss_collate_fn, num_workers=workers,
                                       pin_memory=torch.cuda.is_available()))
    if len(loaders[0]) == 0:
        raise ValueError('the training split {!r} of {} gives no complete batch of {} images per '
                         'process: lower [dataloader] train_batch_size'.format(
                             dl['train_set'], root, sizes[0]))
    return loaders[0], loaders[1]
