"""get_statistics / statistics_dict / get_dataset_statistics on the hand-built dataset.

The comparison with SGB's statistics runs against the recording ``sgb_data_statistics`` and,
with ``GLUONTRAIN_REFERENCES`` set, live against SGB's source."""
import os
import warnings

import numpy as np
import pytest
import torch

from fixtures.recorded import SOURCES, Recorder, from_json_array, json_array
from gluontrain.torch.sgg.data import VGDataset, get_dataset_statistics, get_statistics
from gluontrain.torch.sgg.data.statistics import statistics_dict, statistics_file

try:
    from . import sgb_reference
    from .conftest import NEAR, ON, A, B, C, data_cfg, vg_files
except ImportError:  # imported outside the package by tests/fixtures/make_recorded_fixtures.py
    import sgb_reference  # pylint: disable=import-error
    from conftest import NEAR, ON, A, B, C, data_cfg, vg_files  # pylint: disable=import-error

SGB = Recorder('sgb_data_statistics', sgb_reference.load, "SGB's data/datasets/visual_genome.py")


@pytest.fixture
def train(tiny_root):
    # SGB's statistics split: train, duplicates kept, non-overlapping relations dropped:
    # rows 0 (relations A-B on, A-B near) and 3 (C-B on; its third box A overlaps nothing)
    return VGDataset('train', num_val_im=0, filter_duplicate_rels=False, **vg_files(tiny_root))


def test_fg_bg_matrices_hand_computed(train):
    fg, bg = get_statistics(train, must_overlap=True)
    assert fg.shape == (4, 4, 3) and fg.dtype == np.int64 and bg.shape == (4, 4)
    want_fg = np.zeros((4, 4, 3), np.int64)
    want_fg[A, B, ON] = want_fg[A, B, NEAR] = want_fg[C, B, ON] = 1
    np.testing.assert_array_equal(fg, want_fg)
    # overlapping ordered pairs: A-B, B-A (row 0), B-C, C-B (row 3)
    want_bg = np.zeros((4, 4), np.int64)
    want_bg[A, B] = want_bg[B, A] = want_bg[B, C] = want_bg[C, B] = 1
    np.testing.assert_array_equal(bg, want_bg)
    # every ordered pair: both images hold one box of each class a, b, c
    _, bg_all = get_statistics(train, must_overlap=False)
    want = np.zeros((4, 4), np.int64)
    want[1:, 1:] = 2 * (1 - np.eye(3, dtype=np.int64))
    np.testing.assert_array_equal(bg_all, want)


def test_statistics_dict_pred_dist(train):
    stats = statistics_dict(train)
    assert set(stats) == {'fg_matrix', 'pred_dist', 'obj_classes', 'rel_classes', 'att_classes'}
    fg = stats['fg_matrix']
    assert fg.dtype == torch.int64 and stats['pred_dist'].dtype == torch.float32
    # predicate 0 holds bg + 1
    assert fg[A, B].tolist() == [2, 1, 1] and fg[B, A].tolist() == [2, 0, 0]
    assert fg[C, B].tolist() == [2, 1, 0] and fg[0, 0].tolist() == [1, 0, 0]
    eps = 1e-3
    expect = {(A, B): [0.5, 0.25, 0.25], (B, A): [1, 0, 0], (C, B): [2 / 3, 1 / 3, 0],
              (C, A): [1, 0, 0]}
    for (s, o), p in expect.items():
        np.testing.assert_allclose(stats['pred_dist'][s, o].numpy(),
                                   np.log(np.array(p) + eps).astype(np.float32), rtol=1e-6)
    assert stats['obj_classes'] == ['__background__', 'a', 'b', 'c']
    assert stats['rel_classes'] == ['__background__', 'on', 'near']
    assert stats['att_classes'] == ['__background__', 'red']


def test_dataset_get_statistics_uses_sgb_training_split(tiny_root):
    # whatever split/filters the dataset has, SGB's statistics come from the train split
    test = VGDataset('test', num_val_im=0, **vg_files(tiny_root))
    assert test.get_statistics()['fg_matrix'][A, B].tolist() == [2, 1, 1]


def test_cached_in_output_dir(tiny_root, tmp_path, monkeypatch):
    out = str(tmp_path / 'out')
    cfg = data_cfg(tiny_root, out, **{'DATASETS.NUM_VAL_IM': 0})
    first = get_dataset_statistics(cfg)
    path = statistics_file(cfg)
    assert path == os.path.join(out, 'VG_stanford_filtered_with_attribute_train_statistics.cache')
    assert os.path.isfile(path) and os.listdir(out) == [os.path.basename(path)]
    assert first['fg_matrix'][A, B].tolist() == [2, 1, 1]
    calls = []

    def counting(self):
        calls.append(1)
        return statistics_dict(self.training_split())

    monkeypatch.setattr(VGDataset, 'get_statistics', counting)
    again = get_dataset_statistics(cfg)
    assert calls == [] and set(again) == set(first)
    assert torch.equal(again['pred_dist'], first['pred_dist'])
    assert again['rel_classes'] == first['rel_classes']
    # other data (here: the h5 rewritten) -> recomputed, unlike SGB's cache
    st = os.stat(cfg.DATASETS.DATA_DIR + '/VG-SGG-with-attri.h5')
    os.utime(cfg.DATASETS.DATA_DIR + '/VG-SGG-with-attri.h5',
             ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))
    get_dataset_statistics(cfg)
    assert calls == [1]
    # a different carve-out is other data too
    cfg.DATASETS.NUM_VAL_IM = 1
    assert get_dataset_statistics(cfg)['fg_matrix'][A, B].tolist() == [1, 0, 0]
    assert calls == [1, 1]


def test_needs_one_training_dataset(tiny_root, tmp_path):
    cfg = data_cfg(tiny_root, str(tmp_path))
    cfg.DATASETS.TRAIN = ()
    with pytest.raises(ValueError, match='exactly one'):
        get_dataset_statistics(cfg)


@SGB.case
def statistics(sgb):
    """SGB's ``get_VG_statistics`` (fg, bg; both ``must_overlap``) and ``VGDataset('test')
    .get_statistics()`` on the ``gen_root`` dataset, its fixed num_val_im=5000 set to 4."""
    tmp = sgb_reference.generated_vg()
    files = vg_files(tmp.name)
    vgm = sgb.visual_genome
    vgm.NUM_VAL_IM = 4
    out = {}
    try:
        with warnings.catch_warnings():  # SGB's np.float/np.bool
            warnings.simplefilter('ignore', DeprecationWarning)
            for must_overlap in (True, False):
                fg, bg = vgm.get_VG_statistics(must_overlap=must_overlap, **files)
                out['overlap%d' % must_overlap] = {'fg': fg, 'bg': bg}
            ref = vgm.VGDataset('test', num_val_im=4, **files).get_statistics()
    finally:
        vgm.NUM_VAL_IM = 5000
        tmp.cleanup()
    out['dataset'] = {'fg_matrix': ref['fg_matrix'], 'pred_dist': ref['pred_dist']}
    for k in ('obj_classes', 'rel_classes', 'att_classes'):
        out['dataset'][k] = json_array(ref[k])
    return out


@pytest.mark.parametrize('source', SOURCES)
def test_same_as_sgb_statistics(gen_root, capsys, source):
    """Ours against SGB's get_VG_statistics and VGDataset.get_statistics (recorded, and live
    from the mirror, with its fixed num_val_im=5000 set to the dataset's 4)."""
    ref = SGB.outputs('statistics', source)
    capsys.readouterr()  # SGB's tqdm bars
    files = vg_files(gen_root)
    for must_overlap in (True, False):
        fg, bg = (ref['overlap%d/%s' % (must_overlap, k)] for k in ('fg', 'bg'))
        ours = VGDataset('train', num_val_im=4, filter_duplicate_rels=False, **files)
        fg2, bg2 = get_statistics(ours, must_overlap=must_overlap)
        assert fg.dtype == fg2.dtype and bg.dtype == bg2.dtype
        np.testing.assert_array_equal(fg, fg2)
        np.testing.assert_array_equal(bg, bg2)
        assert fg.sum() > 20 and bg.sum() > fg[:, :, 1:].sum() / 2
    ours = VGDataset('test', num_val_im=4, **files).get_statistics()
    for k in ('fg_matrix', 'pred_dist'):
        assert torch.equal(torch.from_numpy(ref['dataset/' + k]), ours[k]), k
    for k in ('obj_classes', 'rel_classes', 'att_classes'):
        assert from_json_array(ref['dataset/' + k]) == ours[k]
