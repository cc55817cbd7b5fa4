"""Zero-shot triplet file: computed from a train/eval dataset pair, saved and loaded as SGB's."""
import numpy as np
import pytest
import torch

from gluontrain.torch.sgg.evaluation.zeroshot import (compute_zeroshot_triplets,
                                                      dataset_triplets,
                                                      load_or_compute_zeroshot_triplets,
                                                      load_zeroshot_triplets,
                                                      save_zeroshot_triplets)
from sgg_eval_support import SGB_ZEROSHOT, FakeVG, _show, sgb_available

BOX = [[0, 0, 9, 9], [20, 20, 39, 39], [0, 0, 4, 4]]
TRAIN = FakeVG([
    {'width': 50, 'height': 50, 'labels': [1, 2, 3], 'boxes': BOX,
     'rels': [[0, 1, 1], [0, 2, 2]]},                  # man-on-horse, man-has-hat
    {'width': 50, 'height': 50, 'labels': [2, 1], 'boxes': BOX[:2], 'rels': [[0, 1, 3]]},
])
TEST = FakeVG([
    # man-on-horse (seen), man-wearing-hat (unseen), hat-has-man (unseen: order matters)
    {'width': 50, 'height': 50, 'labels': [1, 2, 3], 'boxes': BOX,
     'rels': [[0, 1, 1], [0, 2, 4], [2, 0, 2], [0, 2, 4]]},
    {'width': 50, 'height': 50, 'labels': [2, 1], 'boxes': BOX[:2], 'rels': []},
])


def test_triplets_are_sub_obj_predicate_and_zero_shot_is_eval_minus_train():
    assert dataset_triplets(TRAIN) == {(1, 2, 1), (1, 3, 2), (2, 1, 3)}
    zs = compute_zeroshot_triplets(TRAIN, TEST)
    assert zs.dtype == np.int64
    assert zs.tolist() == [[1, 3, 4], [3, 1, 2]]
    assert compute_zeroshot_triplets(TEST, TEST).shape == (0, 3)


def test_save_load_and_load_or_compute(tmp_path):
    path = str(tmp_path / 'zs.pytorch')
    assert load_or_compute_zeroshot_triplets(path, TRAIN, TEST).tolist() == [[1, 3, 4], [3, 1, 2]]
    t = torch.load(path)
    assert t.dtype == torch.int64 and t.shape == (2, 3)      # SGB's file format
    save_zeroshot_triplets(path, [[5, 5, 1]])
    # an existing file is read, not recomputed
    assert load_or_compute_zeroshot_triplets(path, TRAIN, TEST).tolist() == [[5, 5, 1]]
    assert [p.name for p in tmp_path.iterdir()] == ['zs.pytorch']


def test_bad_files_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match='nothere.pytorch.*load_or_compute'):
        load_zeroshot_triplets(str(tmp_path / 'nothere.pytorch'))
    torch.save(torch.zeros(4, 2), str(tmp_path / 'bad.pytorch'))
    with pytest.raises(ValueError, match=r'bad.pytorch.*\(Z, 3\)'):
        load_zeroshot_triplets(str(tmp_path / 'bad.pytorch'))


@pytest.mark.skipif(not sgb_available(),
                    reason="GLUONTRAIN_REFERENCES not set: needs SGB's source (docs/testing.md)")
def test_loads_sgbs_shipped_file(tmp_path):
    path = tmp_path / 'zeroshot_triplet.pytorch'
    path.write_bytes(_show(SGB_ZEROSHOT))
    zs = load_zeroshot_triplets(str(path))
    # VG150: 5971 (sub_class, obj_class, predicate) rows, predicates up to 50, classes to 150
    assert zs.shape == (5971, 3) and zs[:, 2].max() == 50 and zs[:, :2].max() == 150
    assert zs[0].tolist() == [1, 1, 33]


class RandomDedupVG(FakeVG):
    """As VGDataset's training split: get_groundtruth keeps one random predicate per pair
    (drawing from numpy's global RNG); ``relationships`` / ``gt_classes`` hold them all."""

    def __init__(self, images):
        super().__init__(images)
        self.relationships = [np.array(im['rels'], np.int64).reshape(-1, 3) for im in images]
        self.gt_classes = [np.array(im['labels']) for im in images]

    def get_groundtruth(self, index, evaluation=False, flip_img=False):
        gt = super().get_groundtruth(index, evaluation)
        rels = gt.get_field('relation_tuple')
        gt.add_field('relation_tuple', rels[np.random.permutation(len(rels))[:1]])
        return gt


def test_raw_relations_are_read_without_random_draws():
    ds = RandomDedupVG([{'width': 50, 'height': 50, 'labels': [1, 2], 'boxes': BOX[:2],
                         'rels': [[0, 1, 1], [0, 1, 2], [0, 1, 3]]}])
    np.random.seed(3)
    state = np.random.get_state()
    expected = np.random.rand()      # the next draw, if nobody else draws
    np.random.set_state(state)
    assert dataset_triplets(ds) == {(1, 2, 1), (1, 2, 2), (1, 2, 3)}
    # the fallback through get_groundtruth restores the global RNG state it used
    plain = FakeVG(ds.images)
    plain.get_groundtruth = lambda i, evaluation=False: RandomDedupVG.get_groundtruth(ds, i)
    assert len(dataset_triplets(plain)) == 1
    assert np.random.rand() == expected
