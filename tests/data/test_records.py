"""data.records: the generated scenes as GluonCV's .rec / .lst read back as the VOC files say."""
import os
import subprocess
import sys

import numpy as np
import pytest

from gluontrain.data import synthetic
from gluontrain.data.custom_detection import LstDetection, RecordFileDetection
from gluontrain.data.records import write_records
from gluontrain.yolo3.data import VOCDetection

CLASSES = ['car', 'dog', 'person']
KW = dict(num_train=6, num_val=3, seed=4, image_size=(64, 96), max_objects=3)


@pytest.mark.parametrize('fmt', ['rec', 'lst'])
def test_records_hold_the_voc_writers_images_and_boxes(tmp_path, fmt):
    root = write_records(str(tmp_path / fmt), fmt, classes=CLASSES, **KW)
    devkit = synthetic.write_voc(str(tmp_path / 'voc'), years=(2007,), classes=CLASSES, **KW)
    for split, listed in (('train', 'trainval'), ('val', 'test')):
        ours = RecordFileDetection(root + '/{}.rec'.format(split), classes=CLASSES) \
            if fmt == 'rec' else LstDetection(root + '/{}.lst'.format(split), root=root,
                                              classes=CLASSES)
        voc = VOCDetection(devkit, [(2007, listed)], CLASSES)
        assert len(ours) == len(voc) > 0
        for k in range(len(ours)):
            img, label = ours[k]
            want_img, want = voc[k]
            np.testing.assert_array_equal(img, want_img)  # the same JPEG bytes
            # boxes went through x / width * width in float32 (.rec) or float64 (.lst)
            np.testing.assert_allclose(label[:, :4], want[:, :4], rtol=1e-6, atol=1e-4)
            np.testing.assert_array_equal(label[:, 4], want[:, 4])


def test_a_format_other_than_rec_or_lst_is_refused(tmp_path):
    with pytest.raises(ValueError, match="fmt must be 'rec' or 'lst'"):
        write_records(str(tmp_path), 'json')


def test_the_script_writes_them(tmp_path):
    script = os.path.join(os.path.dirname(__file__), '..', '..', 'scripts', 'make_synthetic_data.py')
    for fmt in ('rec', 'lst'):
        subprocess.run([sys.executable, script, fmt, '--root', str(tmp_path / fmt),
                        '--num-train', '3', '--num-val', '2'], check=True, capture_output=True)
    assert sorted(p.name for p in (tmp_path / 'rec').iterdir()) == ['train.idx', 'train.rec',
                                                                    'val.idx', 'val.rec']
    assert len(LstDetection(str(tmp_path / 'lst' / 'val.lst'), root=str(tmp_path / 'lst'))) == 2
