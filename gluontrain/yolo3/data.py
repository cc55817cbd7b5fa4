"""GluonCV's VOC reading, mixup and batch order for the YOLOv3 recipe, in numpy (both backends).

* :class:`VOCDetection`: ``gluoncv.data.VOCDetection`` / ``CustomVOCDetectionBase``'s items
  and labels (``xmin - 1 ... ymax - 1, class, difficult`` as float64, images as RGB uint8,
  decoded by OpenCV as MXNet's ``imread``: the same pixels);
* :class:`MixupDetection`: ``gluoncv.data.mixup.detection.MixupDetection`` (same draws from
  ``np.random``, the same float32 blend cast to uint8), with its on/off switch in shared
  memory so that loader worker processes see it (the MXNet recipe's fix, kept);
* :class:`RolloverBatchSampler`: Gluon's ``RandomSampler`` + ``BatchSampler(last_batch=
  'rollover')``: the same ``np.random.shuffle`` per pass, the leftover of a pass first in
  the next; with ``shapes`` > 1 it also draws the random input shape every ``interval``
  batches as ``RandomTransformDataLoader`` does (``np.random.choice`` before the pass's
  shuffle, then at every ``interval``-th batch), yielding ``(index, shape index)`` pairs.
"""
import glob
import mmap
import multiprocessing
import os
import re
import xml.etree.ElementTree as ET

import numpy as np

from ..data import checks
from ..data.images import read_bgr
from ..data.views import TransformView
from .args import class_names

__all__ = ['VOCDetection', 'MixupDetection', 'RolloverBatchSampler', 'SharedBuffers',
           'map_shared', 'field_views', 'custom_root',
           'custom_splits', 'voc_class_names', 'voc_folders', 'mixup_switch',
           'set_mixup_switch', 'VOC_DEFAULT_ROOT']

# gluoncv's default VOCdevkit folder
VOC_DEFAULT_ROOT = os.path.join('~', '.mxnet', 'datasets', 'voc')


def voc_class_names(roots):
    """Sorted object names found in the ``Annotations/*.xml`` of the given VOC-style folders."""
    names = set()
    for root in roots:
        for path in glob.glob(os.path.join(root, 'Annotations', '*.xml')):
            for obj in ET.parse(path).getroot().iter('object'):
                names.add(obj.find('name').text.strip().lower())
    return sorted(names)


def custom_root(name, root, classes=None, num_val=None):
    """The folder of ``--dataset custom`` or ``synthetic``: the embedded dataset (generated on
    first use) for ``synthetic``, drawing ``classes`` (``--classes``, VOC names) instead of its
    default five when given and ``num_val`` test images (``--synthetic-val-images``) instead of
    its 50, ``--dataset-root`` for ``custom``.

    Raises
    ------
    ValueError
        ``custom`` without ``--dataset-root``.
    gluontrain.data.checks.DatasetError
        When the folder does not exist (naming it and the fix).
    """
    # here, not at the top: the data writers are needed only by these two datasets
    from ..data import synthetic  # pylint: disable=import-outside-toplevel
    if name == 'synthetic':
        unknown = [c for c in classes or () if c not in synthetic.VOC_CLASSES]
        if unknown:
            raise ValueError('--classes {}: the synthetic dataset draws VOC class names only; '
                             'choose among {}'.format(','.join(unknown),
                                                      ','.join(synthetic.VOC_CLASSES)))
        drawn = dict({'classes': classes} if classes else {},
                     **({'num_val': num_val} if num_val else {}))
        root = synthetic.default_voc_root(root, **drawn)
    elif root is None:
        raise ValueError('--dataset custom needs --dataset-root: a VOCdevkit-style folder '
                         '(with VOC2007/) or one folder with Annotations/, JPEGImages/ and '
                         'ImageSets/Main/{trainval,test}.txt')
    if not os.path.isdir(root):
        checks.check_voc(root, [])  # raises, naming the folder and the fix
    return root


def custom_splits(root):
    """(folders, train splits, val splits) of a custom VOC-style dataset.

    A VOCdevkit trains on ``trainval`` of every ``VOC<year>`` folder and validates on VOC2007
    ``test`` (as ``--dataset voc``); a single VOC-style folder trains on ``trainval`` (or
    ``train``) and validates on ``test`` (or ``val``).
    """
    years = sorted(d for d in os.listdir(root) if re.match(r'VOC\d{4}$', d)
                   and os.path.isdir(os.path.join(root, d)))
    if years:
        train = [(y, 'trainval') for y in years
                 if os.path.isfile(os.path.join(root, y, 'ImageSets', 'Main', 'trainval.txt'))]
        test = [y for y in years
                if os.path.isfile(os.path.join(root, y, 'ImageSets', 'Main', 'test.txt'))]
        return [os.path.join(root, y) for y in years], train, [(test[0] if test else years[0],
                                                                'test')]
    lists = os.path.join(root, 'ImageSets', 'Main')
    val = 'test' if os.path.isfile(os.path.join(lists, 'test.txt')) else 'val'
    return [root], [('', 'trainval' if val == 'test' else 'train')], [('', val)]


def voc_folders(name, args):
    """Where ``--dataset voc``, ``custom`` or ``synthetic`` is read from, checked before any
    reader opens it (:func:`gluontrain.data.checks.check_voc`).

    Parameters
    ----------
    name : str
        ``voc``, ``custom`` or ``synthetic`` (lower case).
    args : argparse.Namespace
        Uses ``dataset_root`` and ``classes``; sets ``args.classes`` for custom / synthetic
        data (the classes found in the annotations unless given), as the reference does.

    Returns
    -------
    (root, train_splits, val_splits, classes)
        ``classes`` is None for ``voc`` (VOC's own 20).
    """
    root = os.path.expanduser(args.dataset_root) if getattr(args, 'dataset_root', None) else None
    if name == 'voc':
        root = root or os.path.expanduser(VOC_DEFAULT_ROOT)
        train_splits, val_splits = [(2007, 'trainval'), (2012, 'trainval')], [(2007, 'test')]
        checks.check_voc(root, train_splits + val_splits)
        return root, train_splits, val_splits, None
    given = class_names(args.classes) if getattr(args, 'classes', '') else None
    root = custom_root(name, root, given if name == 'synthetic' else None,
                       getattr(args, 'synthetic_val_images', None))
    folders, train_splits, val_splits = custom_splits(root)
    if given:
        classes = given
    else:
        try:
            classes = voc_class_names(folders)
        except (ET.ParseError, AttributeError):
            classes = None  # check_voc below reports the broken file
    checks.check_voc(root, train_splits + val_splits, classes=classes)
    args.classes = ','.join(classes)
    return root, train_splits, val_splits, classes


def mixup_switch():
    """A mixup on/off switch ``[enabled, a, b]`` in shared memory: created before a loader
    forks or spawns its workers, it is the one they read (lock-free: one writer, the
    training loop)."""
    return multiprocessing.Array('d', 3, lock=False)


def set_mixup_switch(switch, mixup, args, owner):
    """Set ``switch`` (:func:`mixup_switch`) to ``np.random.beta`` with ``args = (a, b)``, or
    off for ``mixup=None``; any other sampler is refused (only this one crosses processes),
    naming ``owner``."""
    if mixup is None:
        switch[0] = 0.0
    elif mixup is np.random.beta and len(args) == 2:
        switch[0], switch[1], switch[2] = 1.0, float(args[0]), float(args[1])
    else:
        raise ValueError('{} shares only np.random.beta(a, b) (or None) with worker '
                         'processes; got {!r}{}'.format(owner, mixup, args))


class VOCDetection(TransformView):
    """VOC-format detection items as GluonCV reads them.

    Parameters
    ----------
    root : str
        ``voc``: the VOCdevkit (``splits`` of ``(year, name)``); custom: the folder holding
        the ``splits`` ``(subfolder, name)`` (``''`` for ``root`` itself).
    splits : list of tuple
    classes : sequence of str
    custom : bool
        ``CustomVOCDetectionBase``: subfolders named as given, and images whose boxes break
        GluonCV's validity rule dropped (it drops them; ``VOCDetection`` raises).
    transform : callable, optional
        ``transform(img, label)``, set later with :meth:`transform`.
    """

    def __init__(self, root, splits, classes, custom=False, transform=None):
        self.root, self.classes = root, tuple(classes)
        self.index_map = {c: i for i, c in enumerate(self.classes)}
        self._transform = transform
        self.items = []
        for sub, name in splits:
            folder = os.path.join(root, 'VOC{}'.format(sub) if isinstance(sub, int) else sub) \
                if sub != '' else root
            with open(os.path.join(folder, 'ImageSets', 'Main', name + '.txt')) as f:
                self.items += [(folder, line.strip()) for line in f.readlines()]
        self.labels = [self._load_label(i) for i in range(len(self.items))]
        if custom:
            keep = [i for i, lab in enumerate(self.labels) if lab is not None]
            self.items = [self.items[i] for i in keep]
            self.labels = [self.labels[i] for i in keep]
        elif any(lab is None for lab in self.labels):
            bad = self.items[[lab is None for lab in self.labels].index(True)]
            raise ValueError('{}: a box outside the image (GluonCV refuses it)'.format(
                os.path.join(bad[0], 'Annotations', bad[1] + '.xml')))

    def __len__(self):
        return len(self.items)

    def _load_label(self, idx):
        folder, image_id = self.items[idx]
        tree = ET.parse(os.path.join(folder, 'Annotations', image_id + '.xml')).getroot()
        size = tree.find('size')
        width, height = float(size.find('width').text), float(size.find('height').text)
        rows = []
        for obj in tree.iter('object'):
            try:
                difficult = int(obj.find('difficult').text)
            except (ValueError, AttributeError):
                difficult = 0
            name = obj.find('name').text.strip().lower()
            if name not in self.index_map:
                continue
            box = obj.find('bndbox')
            xmin, ymin, xmax, ymax = (float(box.find(k).text) - 1
                                      for k in ('xmin', 'ymin', 'xmax', 'ymax'))
            if not (0 <= xmin < width and 0 <= ymin < height and xmin < xmax <= width and
                    ymin < ymax <= height):
                return None
            rows.append([xmin, ymin, xmax, ymax, self.index_map[name], difficult])
        return np.array(rows)

    def image(self, idx):
        """The RGB uint8 image of item ``idx``."""
        folder, image_id = self.items[idx]
        path = os.path.join(folder, 'JPEGImages', image_id + '.jpg')
        # MXNet's imread (GluonCV's VOCDetection) ignores the EXIF orientation
        return np.ascontiguousarray(read_bgr(path, 'image {}'.format(image_id),
                                             exif_orientation=False)[:, :, ::-1])

    def _item(self, idx):
        return self.image(idx), self.labels[idx].copy()


class MixupDetection(TransformView):
    """``MixupDetection(dataset)``: with a Beta draw ``lambd < 1`` the item is blended with a
    random other one; labels gain a weight column (``lambd``, ``1 - lambd``; 1 unmixed)."""

    def __init__(self, dataset):
        self._dataset = dataset
        self.classes = getattr(dataset, 'classes', None)
        self._shared = mixup_switch()

    def set_mixup(self, mixup=None, *args):
        """``np.random.beta, a, b`` to enable, ``None`` to disable."""
        set_mixup_switch(self._shared, mixup, args, 'MixupDetection')

    def __len__(self):
        return len(self._dataset)

    def _item(self, idx):
        img1, label1 = self._dataset[idx]
        lambd = 1
        if self._shared[0]:
            lambd = max(0, min(1, np.random.beta(self._shared[1], self._shared[2])))
        if lambd >= 1:
            return img1, np.hstack((label1, np.ones((label1.shape[0], 1))))
        idx2 = np.random.choice(np.delete(np.arange(len(self)), idx))
        img2, label2 = self._dataset[idx2]
        height, width = max(img1.shape[0], img2.shape[0]), max(img1.shape[1], img2.shape[1])
        mix = np.zeros((height, width, 3), np.float32)
        mix[:img1.shape[0], :img1.shape[1]] = img1.astype(np.float32) * np.float32(lambd)
        mix[:img2.shape[0], :img2.shape[1]] += img2.astype(np.float32) * np.float32(1. - lambd)
        y1 = np.hstack((label1, np.full((label1.shape[0], 1), lambd)))
        y2 = np.hstack((label2, np.full((label2.shape[0], 1), 1. - lambd)))
        return mix.astype(np.uint8), np.vstack((y1, y2))


class RolloverBatchSampler:
    """Gluon's shuffled ``BatchSampler(..., 'rollover')``, optionally with
    ``RandomTransformDataLoader``'s random shape choice.

    Parameters
    ----------
    length : int
        Dataset size.
    batch_size : int
    shapes : int
        Number of candidate transforms (1: plain indices are yielded).
    interval : int
        Batches between shape draws.
    indices : sequence of int, optional
        Shuffle these instead of ``range(length)`` (a rank's shard).

    ``len()`` is the number of full batches of the next pass; ``prev`` (the leftover) is the
    state to checkpoint.
    """

    def __init__(self, length, batch_size, shapes=1, interval=10, indices=None):
        self.length, self.batch_size = int(length), int(batch_size)
        self.shapes, self.interval = int(shapes), max(int(interval), 1)
        self.indices = None if indices is None else np.asarray(indices)
        self.prev = []

    def __len__(self):
        n = self.length if self.indices is None else len(self.indices)
        return (len(self.prev) + n) // self.batch_size

    def _order(self):
        order = np.arange(self.length) if self.indices is None else self.indices.copy()
        np.random.shuffle(order)
        return order

    def __iter__(self):
        shape = int(np.random.choice(self.shapes)) if self.shapes > 1 else None
        batch, self.prev = self.prev, []
        count = 0
        for i in self._order():
            batch.append(int(i))
            if len(batch) == self.batch_size:
                if shape is not None:
                    if count % self.interval == 0:
                        shape = int(np.random.choice(self.shapes))
                    yield [(i, shape) for i in batch]
                else:
                    yield batch
                count += 1
                batch = []
        if batch:
            self.prev = batch


# A loader worker's batch buffers: anonymous shared-memory files (memfd) reused from batch to
# batch. A fresh shared-memory page costs the worker a fault and a zeroing on its first write
# (per batch of 8 at 608 px, ~35 MB: several times the cost of writing into reused pages);
# the main process marks a buffer free when the last array viewing its batch is gone.
#: bytes before the data; the first holds the buffer's state
_HEADER = 64
_FREE, _SENT = 0, 1


class _Buffer:
    """One memfd, mapped; its descriptor closes when neither the pool nor a batch holds it."""

    def __init__(self, fd, capacity):
        self.fd, self.capacity = fd, capacity
        self.mapping = mmap.mmap(fd, _HEADER + max(capacity, 1) * 4)

    def __del__(self):
        if getattr(self, 'fd', None) is not None:
            os.close(self.fd)
            self.fd = None


class _MainMapping(mmap.mmap):
    """The main process's mapping of a worker's buffer: marks it free when it is released
    (the last array viewing it gone)."""

    def __del__(self):
        try:
            self[0] = _FREE
        except (ValueError, IndexError, TypeError):  # closed already
            pass


def map_shared(fd, size):
    """The main process's side of a batch a worker wrote into :class:`SharedBuffers`: the
    ``size`` float32 values of the buffer behind ``fd`` (closed here), the same pages; the
    buffer goes back to the worker when the returned array and every view of it are gone."""
    try:
        mapping = _MainMapping(fd, _HEADER + max(size, 1) * 4)
    finally:
        os.close(fd)
    return np.frombuffer(mapping, np.float32, size, offset=_HEADER)


class SharedBuffers:
    """Float32 batch buffers of a loader worker in anonymous shared memory, reused once the
    main process has released the batch a buffer carried (:func:`map_shared`).

    ``get(size)`` returns ``(flat, buffer)``: a float32 array of ``size`` values in a free
    buffer that is large enough (else a new one), marked sent; send ``buffer.fd`` with the
    batch, once. ``buffer`` is None (and ``flat`` plain memory) where ``memfd_create`` is
    missing or refused. At most ``keep`` buffers are kept for reuse (released or not); a
    process forked from this one starts with none.
    """

    def __init__(self, keep=4):
        self.keep, self.buffers, self.pid = keep, [], os.getpid()

    def get(self, size):
        """A float32 array of ``size`` values to fill, and its buffer (see the class)."""
        if self.pid != os.getpid():  # inherited through a fork: those buffers are the parent's
            self.buffers, self.pid = [], os.getpid()
        for buf in self.buffers:
            if buf.capacity >= size and buf.mapping[0] == _FREE:
                buf.mapping[0] = _SENT
                return np.frombuffer(buf.mapping, np.float32, size, offset=_HEADER), buf
        try:
            fd = os.memfd_create('gluontrain-batch', os.MFD_CLOEXEC)
        except (AttributeError, OSError):  # not Linux, or a kernel / sandbox without it
            return np.empty(size, np.float32), None
        try:
            os.ftruncate(fd, _HEADER + max(size, 1) * 4)
            buf = _Buffer(fd, size)
        except BaseException:
            os.close(fd)
            raise
        buf.mapping[0] = _SENT
        self.buffers.append(buf)
        del self.buffers[:-self.keep]  # the oldest go (in flight, they free with their batch)
        return np.frombuffer(buf.mapping, np.float32, size, offset=_HEADER), buf


def field_views(flat, shapes):
    """The fields of a batch buffer as views of ``flat`` (a 1-D numpy array or NDArray), in
    order: how both backends' loaders read the arrays a worker wrote one after another."""
    out, start = [], 0
    for shape in shapes:
        size = int(np.prod(shape))
        out.append(flat[start:start + size].reshape(shape))
        start += size
    return out
