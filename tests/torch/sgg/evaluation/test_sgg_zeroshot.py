"""Zero-shot triplet file: computed from a train/eval dataset pair, saved and loaded as SGB's.

``test_loads_sgbs_shipped_file`` reads SGB's shipped ``zeroshot_triplet.pytorch`` twice: as
recorded in ``tests/fixtures/recorded/sgb_zeroshot.npz`` (the file's bytes, its sha256 and
the sha256 of the array SGB's vg_eval.py loads from it; everywhere) and live from the SGB
checkout under ``$GLUONTRAIN_REFERENCES``. Regenerate with
``GLUONTRAIN_REFERENCES=DIR python tests/fixtures/make_recorded_fixtures.py sgb_zeroshot``.
"""
import hashlib
import io

import numpy as np
import pytest
import torch

from gluontrain.torch.sgg.evaluation.zeroshot import (compute_zeroshot_triplets,
                                                      dataset_triplets,
                                                      load_or_compute_zeroshot_triplets,
                                                      load_zeroshot_triplets,
                                                      save_zeroshot_triplets)
from fixtures.recorded import SOURCES, Recorder
from sgg_eval_support import SGB_ZEROSHOT, FakeVG, sgb_available, sgb_bytes

# sha256 of SGB's zeroshot_triplet.pytorch (HEAD of its checkout when recorded)
SGB_ZEROSHOT_SHA256 = '3ab7a6a815da643902115adeb96f188bfe963938b31d74fa7719c764b98fb88a'


def _sgb_zeroshot_file():
    """Bytes of SGB's shipped zero-shot file, or None without the checkout."""
    return sgb_bytes(SGB_ZEROSHOT) if sgb_available() else None


SGB = Recorder('sgb_zeroshot', _sgb_zeroshot_file, "SGB's zeroshot_triplet.pytorch")


@SGB.case
def shipped_file(data):
    """SGB's zeroshot_triplet.pytorch: its bytes and sha256, and the shape and sha256 of the
    int64 array SGB's vg_eval.py reads from it (``torch.load(...).long().numpy()``)."""
    arr = np.ascontiguousarray(
        torch.load(io.BytesIO(data), map_location=torch.device('cpu')).long().numpy())
    return {'file': np.frombuffer(data, np.uint8), 'sha256': hashlib.sha256(data).hexdigest(),
            'sgb_array/shape': np.array(arr.shape, np.int64),
            'sgb_array/sha256': hashlib.sha256(arr.tobytes()).hexdigest()}

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


@pytest.mark.parametrize('source', SOURCES)
def test_loads_sgbs_shipped_file(tmp_path, source):
    """Our loader on SGB's own file (recorded bytes, or live from the checkout) gives the
    array SGB's vg_eval.py reads, bit for bit."""
    ref = SGB.outputs('shipped_file', source)
    data = ref['file'].tobytes()
    assert hashlib.sha256(data).hexdigest() == str(ref['sha256']) == SGB_ZEROSHOT_SHA256
    path = tmp_path / 'zeroshot_triplet.pytorch'
    path.write_bytes(data)
    zs = load_zeroshot_triplets(str(path))
    # VG150: 5971 (sub_class, obj_class, predicate) rows, predicates up to 50, classes to 150
    assert zs.shape == (5971, 3) and zs[:, 2].max() == 50 and zs[:, :2].max() == 150
    assert zs[0].tolist() == [1, 1, 33]
    assert zs.dtype == np.int64 and list(zs.shape) == ref['sgb_array/shape'].tolist()
    assert hashlib.sha256(np.ascontiguousarray(zs).tobytes()).hexdigest() == \
        str(ref['sgb_array/sha256'])


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
