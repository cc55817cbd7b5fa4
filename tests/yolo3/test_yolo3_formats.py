"""yolo3.formats: --dataset rec / lst, their files, classes and one-line refusals."""
import argparse

import numpy as np
import pytest

from gluontrain.data.checks import DatasetError
from gluontrain.data.records import write_records
from gluontrain.yolo3.formats import record_datasets

CLASSES = 'car,dog'


@pytest.fixture(scope='module')
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp('formats')
    kw = dict(classes=['car', 'dog'], num_train=5, num_val=3, seed=2, image_size=(64, 80),
              max_objects=2)
    return {fmt: write_records(str(base / fmt), fmt, **kw) for fmt in ('rec', 'lst')}


def _args(root, classes=CLASSES):
    return argparse.Namespace(dataset_root=root, classes=classes)


def test_rec_and_lst_give_the_same_items(roots):
    rec = record_datasets('rec', _args(roots['rec'], ' car, dog,'))
    lst = record_datasets('lst', _args(roots['lst']))
    assert rec[2] == lst[2] == ['car', 'dog']
    for a, b in zip(rec[:2], lst[:2]):
        assert len(a) == len(b) > 0
        img_a, label_a = a[0]
        img_b, label_b = b[0]
        np.testing.assert_array_equal(img_a, img_b)
        np.testing.assert_allclose(label_a, label_b, rtol=1e-6, atol=1e-4)


@pytest.mark.parametrize('fmt, args, error, words', [
    ('rec', dict(classes=''), ValueError, '--dataset rec needs --classes'),
    ('lst', dict(root=''), ValueError, '--dataset lst needs --dataset-root'),
    ('rec', dict(root='/nonexistent/x'), DatasetError, 'train.rec does not exist'),
    ('rec', dict(classes='car'), DatasetError, 'class id 1 is not one of the 1 classes given'),
])
def test_what_cannot_be_read_is_one_line(roots, fmt, args, error, words):
    ns = _args(args.get('root', roots[fmt]), args.get('classes', CLASSES))
    with pytest.raises(error) as info:
        record_datasets(fmt, ns)
    text = str(info.value)
    assert words in text
    # one line, or the validators' list of problems under one line naming the file
    assert '\n' not in text.strip() or text.splitlines()[0].startswith('3 problems in '
                                                                        'RecordIO file ')
