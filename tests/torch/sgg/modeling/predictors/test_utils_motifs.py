"""utils_motifs: GloVe reading vs random init, the 9-d box code, one-hot logits, packing order."""
import logging

import numpy as np
import pytest
import torch

from gluontrain.torch.sgg.modeling.predictors import utils_motifs as um
from gluontrain.torch.twostage.structures import BoxList


def _write_glove(folder, dim=3):
    lines = ['man 0.1 0.2 0.3', 'horse -1 0 1', 'racket 5 6 7', 'tennis 9 9 9']
    (folder / 'glove.6B.{}d.txt'.format(dim)).write_text('\n'.join(lines) + '\n')


def test_glove_file_is_read_with_longest_word_fallback(tmp_path, caplog):
    _write_glove(tmp_path)
    torch.manual_seed(0)
    with caplog.at_level(logging.INFO):
        vec = um.obj_edge_vectors(['horse', 'man', 'tennis racket', 'zebra'], str(tmp_path),
                                  wv_dim=3)
    torch.testing.assert_close(vec[0], torch.tensor([-1., 0., 1.]))
    torch.testing.assert_close(vec[1], torch.tensor([0.1, 0.2, 0.3]))
    # 'tennis racket' -> longest word; a tie keeps the first ('tennis'), SGB's stable sort
    torch.testing.assert_close(vec[2], torch.tensor([9., 9., 9.]))
    torch.manual_seed(0)
    random_rows = torch.empty(4, 3).normal_(0, 1)
    torch.testing.assert_close(vec[3], random_rows[3])          # unknown word: N(0, 1) row
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_missing_glove_gives_random_rows_and_one_warning_line(tmp_path, caplog):
    torch.manual_seed(1)
    with caplog.at_level(logging.WARNING):
        vec = um.obj_edge_vectors(['man', 'horse'], str(tmp_path), wv_dim=5)
        um.obj_edge_vectors(['man', 'horse'], str(tmp_path), wv_dim=5)   # no second warning
    torch.manual_seed(1)
    torch.testing.assert_close(vec, torch.empty(2, 5).normal_(0, 1))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and '\n' not in warnings[0]
    assert 'glove.6B.5d.txt' in warnings[0] and 'GLOVE_DIR' in warnings[0]


def test_glove_dimension_and_corrupt_file_errors(tmp_path):
    _write_glove(tmp_path, dim=4)   # file named 4d but holds 3 values
    with pytest.raises(ValueError, match='EMBED_DIM is 4'):
        um.obj_edge_vectors(['man'], str(tmp_path), wv_dim=4)
    (tmp_path / 'glove.6B.2d.txt').write_text('a 1 2\nb 1 2 3\n')
    with pytest.raises(ValueError, match='line 2'):
        um.obj_edge_vectors(['a'], str(tmp_path), wv_dim=2)


def test_sgb_pt_cache_is_read(tmp_path):
    torch.save(({'man': 0}, torch.tensor([[4., 5.]]), 2), str(tmp_path / 'glove.6B.2d.pt'))
    torch.testing.assert_close(um.obj_edge_vectors(['man'], str(tmp_path), wv_dim=2)[0],
                               torch.tensor([4., 5.]))


def test_encode_box_info_hand_computed():
    p = BoxList(torch.tensor([[10., 20., 29., 59.]]), (100, 200))
    # w = 20, h = 40, cx = 20, cy = 40 (x1 + w/2 with the +1 width)
    expected = [20 / 100, 40 / 200, 20 / 100, 40 / 200, 10 / 100, 20 / 200, 29 / 100,
                59 / 200, 800 / 20000]
    q = BoxList(torch.tensor([[0., 0., 9., 9.]]), (10, 20))
    out = um.encode_box_info([p, q])
    np.testing.assert_allclose(out[0].numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(out[1].numpy(), [1, .5, .5, .25, 0, 0, .9, .45, .5], rtol=1e-6)
    with pytest.raises(ValueError, match='xyxy'):
        um.encode_box_info([p.convert('xywh')])


def test_to_onehot():
    torch.testing.assert_close(um.to_onehot(torch.tensor([2, 0]), 3),
                               torch.tensor([[-1000., -1000., 1000.], [1000., -1000., -1000.]]))


def test_sort_by_score_packs_time_major_largest_image_first():
    p1 = BoxList(torch.tensor([[0., 0, 1, 1], [50., 0, 51, 1]]), (100, 100))
    p2 = BoxList(torch.tensor([[10., 0, 11, 1], [80., 0, 81, 1], [30., 0, 31, 1]]), (100, 100))
    perm, inv_perm, lens = um.sort_rois([p1, p2], 'leftright')
    # image 2 (3 boxes) is the first sequence: right to left 3, 4, 2; image 1: 1, 0
    assert perm.tolist() == [3, 1, 4, 0, 2]
    assert lens.tolist() == [2, 2, 1]
    assert torch.equal(perm[inv_perm], torch.arange(5))
    perm, _, _ = um.sort_rois([p1, p2], 'size')
    assert sorted(perm.tolist()) == [0, 1, 2, 3, 4]


def test_txt_read_writes_sgbs_pt_cache_and_is_kept(tmp_path, monkeypatch):
    _write_glove(tmp_path)
    first = um.load_word_vectors(str(tmp_path), 'glove.6B', 3)
    cached = torch.load(str(tmp_path / 'glove.6B.3d.pt'), weights_only=True)
    assert cached[0] == first[0] and cached[2] == 3
    torch.testing.assert_close(cached[1], first[1])
    assert not [p for p in tmp_path.iterdir() if p.name.endswith('.tmp')]
    # the next layers of the same model reuse the vectors without reading the files
    monkeypatch.setattr(um, '_load_pt', lambda path: pytest.fail('re-read ' + path))
    assert um.load_word_vectors(str(tmp_path), 'glove.6B', 3) is first


def test_read_only_glove_dir_still_loads(tmp_path, monkeypatch):
    _write_glove(tmp_path, dim=3)

    def refuse(path, save_fn):
        raise OSError(30, 'Read-only file system', path)
    monkeypatch.setattr(um, 'atomic_save_file', refuse)
    vec = um.obj_edge_vectors(['horse'], str(tmp_path), wv_dim=3)
    torch.testing.assert_close(vec[0], torch.tensor([-1., 0., 1.]))
    assert not (tmp_path / 'glove.6B.3d.pt').exists()
