"""Validation of the Visual Genome scene-graph files, and their names (SGB's)."""
import os

import numpy as np

from .checks import GENERATE, SHOWN, DatasetError, Problems, load_json, missing_root
from .images import image_problem, looks_truncated

__all__ = ['check_vg', 'check_vg_files', 'SGB_CORRUPTED_IMAGES', 'H5_NAME', 'DICTS_NAME',
           'IMAGE_DATA', 'IMAGE_DIR']

# the files of SGB's datasets/vg folder
H5_NAME = 'VG-SGG-with-attri.h5'
DICTS_NAME = 'VG-SGG-dicts-with-attri.json'
IMAGE_DATA = 'image_data.json'
IMAGE_DIR = 'VG_100K'


def check_vg(root, check_images=True):
    """Validate a Visual-Genome scene-graph dataset (the files :func:`load_vg` reads).

    Parameters
    ----------
    root : str
        Folder holding ``VG-SGG-with-attri.h5``, ``VG-SGG-dicts-with-attri.json``,
        ``image_data.json`` and ``VG_100K/``.
    check_images : bool
        Check that every image file exists and is readable.

    Returns
    -------
    dict
        ``{'images': int, 'boxes': int, 'relationships': int}``.

    Raises
    ------
    DatasetError
        Listing every problem with its file and the fix.
    """
    root = os.path.abspath(os.path.expanduser(root))
    if not os.path.isdir(root):
        missing_root('VG', root, H5_NAME)
    counts, _ = _check_vg(os.path.join(root, H5_NAME), os.path.join(root, DICTS_NAME),
                          os.path.join(root, IMAGE_DATA), os.path.join(root, IMAGE_DIR),
                          check_images, 'Visual Genome dataset {}'.format(root))
    return counts


def check_vg_files(roidb_file, dict_file, image_file, img_dir, check_images=False):
    """Validate the VG-SGG files given one by one (Scene-Graph-Benchmark's ``VGDataset``
    arguments) and return the ``image_data.json`` entries aligned with the h5 image rows.

    The h5 has no image ids: its rows are matched to ``image_file`` by position. The released
    ``image_data.json`` has four more entries than the h5 (SGB's corrupted images
    ``1592/1722/4616/4617.jpg``); they are dropped when that makes the two lengths agree, as
    SGB does. Any other length difference is an error naming the first row whose boxes do not
    fit its entry's image size (SGB instead skipped missing jpgs and asserted 108073 images,
    silently pairing every later h5 row with the wrong image).

    Parameters
    ----------
    roidb_file, dict_file, image_file : str
        ``VG-SGG-with-attri.h5``, ``VG-SGG-dicts-with-attri.json``, ``image_data.json``.
    img_dir : str
        ``VG_100K`` folder (``<image_id>.jpg``).
    check_images : bool
        Also open every image.

    Returns
    -------
    list of dict
        One ``image_data.json`` entry per h5 image row.

    Raises
    ------
    DatasetError
        Listing every problem with its file and the fix.
    """
    return _check_vg(roidb_file, dict_file, image_file, img_dir, check_images,
                     'Visual Genome files {}'.format(roidb_file))[1]


def _check_vg(h5_path, dicts_path, image_file, img_dir, check_images, what):
    import h5py  # pylint: disable=import-outside-toplevel

    report = Problems(what)
    for path in (h5_path, dicts_path, image_file):
        if not os.path.isfile(path):
            report.add('{} is missing: the dataset root must hold {}, {}, {} and {}/ (generate '
                       'one with `{}`).'.format(path, H5_NAME, DICTS_NAME, IMAGE_DATA, IMAGE_DIR,
                                                GENERATE.format('vg')))
    report.raise_if_any()
    dicts = load_json(report, dicts_path, 'VG dictionary file')
    image_data = load_json(report, image_file, 'VG image list')
    report.raise_if_any()
    keys = ('split', 'img_to_first_box', 'img_to_last_box', 'img_to_first_rel',
            'img_to_last_rel', 'boxes_1024', 'labels', 'attributes', 'relationships',
            'predicates')
    try:
        with h5py.File(h5_path, 'r') as f:
            absent = [k for k in keys if k not in f]
            if absent:
                raise DatasetError('{} lacks the datasets {}; regenerate it with the VG-SGG '
                                   'preprocessing.'.format(h5_path, absent))
            d = {k: f[k][:] for k in keys}
    except OSError as e:
        raise DatasetError('{} cannot be opened as HDF5 ({}); re-download or regenerate '
                           'it.'.format(h5_path, e)) from e
    n_img, n_box, n_rel = len(d['split']), len(d['labels']), len(d['relationships'])
    for names, unit, ref in ((keys[1:5], 'entries', 'split'), (('boxes_1024', 'attributes'),
                             'rows', 'labels'), (('predicates',), 'rows', 'relationships')):
        for k in names:
            if len(d[k]) != len(d[ref]):
                report.add('{}: {} has {} {} but {} has {}.'.format(h5_path, k, len(d[k]), unit,
                                                                   ref, len(d[ref])))
    report.raise_if_any()
    image_data = _align_image_data(report, h5_path, image_file, image_data, d)
    report.raise_if_any()
    for k, vocab in (('labels', 'idx_to_label'), ('predicates', 'idx_to_predicate')):
        n = len(dicts.get(vocab, {}))
        bad = np.flatnonzero((d[k][:, 0] < 1) | (d[k][:, 0] > n))
        if len(bad):
            report.add('{}: {} at rows {} are outside 1..{} ({}); fix them.'.format(
                h5_path, k, bad[:5].tolist(), n, dicts_path))
    boxes = d['boxes_1024']
    for j in np.flatnonzero(~np.isfinite(boxes.astype(np.float64)).all(1))[:SHOWN]:
        # a float h5 can hold NaN / inf; every comparison below lets them through
        report.add('{}: boxes_1024 row {} ({}) = {} is not finite; write pixel numbers or drop '
                   'the box.'.format(h5_path, j, _box_owner(d, image_data, j),
                                     boxes[j].tolist()))
    bad_box = np.flatnonzero((boxes[:, :2] < 0).any(1) | (boxes[:, 2:] <= 0).any(1))
    if len(bad_box):
        report.add('{}: boxes_1024 rows {} have a negative centre or non-positive size; fix '
                   'them.'.format(h5_path, bad_box[:5].tolist()))
    for i in range(n_img):
        _check_vg_image(report, h5_path, d, i, image_data[i], n_box, n_rel)
        if check_images:
            path = os.path.join(img_dir, '{}.jpg'.format(image_data[i].get('image_id')))
            problem = image_problem(path)
            if not problem and looks_truncated(path):
                # PIL (SGB's reader) refuses it when decoding, which could be hours into the
                # run when the sampler first draws it: say it now
                problem = 'is truncated (its data ends early)'
            if problem:
                report.add('image {} (entry {} of {}) {}: restore it.'.format(
                    path, i, image_file, problem))
    report.raise_if_any()
    return {'images': n_img, 'boxes': n_box, 'relationships': n_rel}, image_data


def _box_owner(d, image_data, row):
    """``'image #i (image_id N)'`` of global box ``row``."""
    for i, (b0, b1) in enumerate(zip(d['img_to_first_box'], d['img_to_last_box'])):
        if 0 <= b0 <= row <= b1:
            return 'image #{} (image_id {})'.format(i, image_data[i].get('image_id'))
    return 'no image'


# SGB's load_image_filenames skips these entries of the released image_data.json
SGB_CORRUPTED_IMAGES = ('1592.jpg', '1722.jpg', '4616.jpg', '4617.jpg')


def _align_image_data(report, h5_path, image_file, image_data, d):
    n_img = len(d['split'])
    if not isinstance(image_data, list):
        report.add('{} must be a JSON list of image entries.'.format(image_file))
        return None
    if len(image_data) == n_img:
        return image_data
    kept = [e for e in image_data
            if '{}.jpg'.format(e.get('image_id')) not in SGB_CORRUPTED_IMAGES]
    if len(kept) == n_img:
        return kept
    report.add('{} has {} entries (after dropping SGB\'s corrupted images: {}) but {} has {} '
               'image rows; the two must list the same images in the same order. {} Regenerate '
               'or restore the matching image_data.json.'.format(
                   image_file, len(image_data), len(kept), h5_path, n_img,
                   _first_misfit(d, kept, image_file)))
    return None


def _first_misfit(d, image_data, image_file):
    """Where the rows first disagree: the first h5 row whose boxes (at the 1024 scale) do not fit
    the image size of the ``image_data`` entry at the same position."""
    boxes = d['boxes_1024'].astype(np.float64)
    for i in range(min(len(image_data), len(d['split']))):
        b0, b1 = int(d['img_to_first_box'][i]), int(d['img_to_last_box'][i])
        info = image_data[i]
        try:
            width, height = float(info['width']), float(info['height'])
        except (KeyError, TypeError, ValueError):
            return 'Entry {} of {} has no width/height.'.format(i, image_file)
        if b0 < 0 or not 0 <= b0 <= b1 < len(boxes):
            continue
        b = boxes[b0:b1 + 1]
        scale = 1024.0 / max(width, height)
        # 2 px of slack: the preprocessing floors corners and ceils extents
        if ((b[:, 0] + b[:, 2] / 2).max() > scale * width + 2
                or (b[:, 1] + b[:, 3] / 2).max() > scale * height + 2):
            return ('First mismatch: h5 image row {} has boxes outside the {}x{} image of entry '
                    '{} (image_id {}); the rows part at or before it.'.format(
                        i, info['width'], info['height'], i, info.get('image_id')))
    return 'No row\'s boxes contradict its entry, so the first mismatch is unknown.'


def _check_vg_image(report, h5_path, d, i, info, n_box, n_rel):
    where = '{}: image #{} (image_id {})'.format(h5_path, i, info.get('image_id'))
    b0, b1 = int(d['img_to_first_box'][i]), int(d['img_to_last_box'][i])
    r0, r1 = int(d['img_to_first_rel'][i]), int(d['img_to_last_rel'][i])
    if (b0 < 0) != (b1 < 0) or (b0 >= 0 and not 0 <= b0 <= b1 < n_box):
        report.add('{}: box range img_to_first_box..img_to_last_box = {}..{} is not inside '
                   '0..{}; fix the index arrays.'.format(where, b0, b1, n_box - 1))
        return
    if (r0 < 0) != (r1 < 0) or (r0 >= 0 and not 0 <= r0 <= r1 < n_rel):
        report.add('{}: relationship range img_to_first_rel..img_to_last_rel = {}..{} is not '
                   'inside 0..{}; fix the index arrays.'.format(where, r0, r1, n_rel - 1))
        return
    if r0 >= 0:
        if b0 < 0:
            report.add('{}: has relationships but no boxes.'.format(where))
            return
        rels = d['relationships'][r0:r1 + 1]
        outside = np.flatnonzero(((rels < b0) | (rels > b1)).any(1))
        for j in outside[:3]:
            report.add('{}: relationship #{} = {} points outside the image\'s boxes {}..{} '
                       '(relationships hold global box indices); fix it.'.format(
                           where, r0 + j, rels[j].tolist(), b0, b1))
