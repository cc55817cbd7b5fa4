"""yolo3.transfer: GluonCV's reuse_weights spellings, errors, warnings and copied rows."""
import os

import pytest

from gluontrain.yolo3.transfer import resolve_reuse, reuse_summary, rows_to_copy

OLD, NEW = ['cat', 'dog', 'person'], ['person', 'bird', 'dog']


@pytest.mark.parametrize('reuse, want', [
    ({0: 2, 2: 1}, {0: 2, 2: 1}), ({'person': 'person', 'dog': 1}, {0: 2, 2: 1}),
    (['dog', 'person'], {2: 1, 0: 2}), (None, None), ('person', None)])
def test_the_three_spellings_resolve_to_indices(reuse, want):
    assert resolve_reuse(OLD, NEW, reuse) == want


@pytest.mark.parametrize('reuse, message', [
    ({'horse': 'cat'}, "horse not found in new class names"),
    ({0: 'horse'}, "horse not found in old class names"),
    ({3: 0}, 'Index 3 out of bounds for new class names'),
    ({0: -1}, 'Index -1 out of bounds for old class names')])
def test_a_dict_that_names_nothing_raises_as_gluoncv(reuse, message):
    with pytest.raises(ValueError, match=message):
        resolve_reuse(OLD, NEW, reuse)


def test_a_list_name_missing_on_one_side_is_warned_and_skipped():
    with pytest.warns(UserWarning, match=r"bird not found in old: \['cat', 'dog', 'person'\]"):
        assert resolve_reuse(OLD, NEW, ['bird', 'dog']) == {2: 1}


def test_rows_copied_per_anchor_class_then_box_rows():
    # 2 anchors, 3 old classes (8 rows an anchor), 2 new (7 rows an anchor)
    pairs = rows_to_copy({1: 2}, 2, 3, 2)
    assert pairs == [(6, 7)] + [(r, r) for r in range(5)] + [(13, 15)] + \
        [(7 + r, 8 + r) for r in range(5)]
    assert rows_to_copy({}, 2, 3, 2) == [] and rows_to_copy(None, 2, 3, 2) == []
    assert rows_to_copy(None, 2, 3, 2, keep_box_rows=True) == \
        [(r, r) for r in range(5)] + [(7 + r, 8 + r) for r in range(5)]
    with pytest.warns(UserWarning, match='reuse mapping 2/2 -> 0/3 out of range'):
        assert rows_to_copy({2: 0}, 2, 3, 2) == []


def test_the_log_line_says_what_came_from_where():
    line = reuse_summary(OLD, NEW, {0: 2}, 'yolo3_darknet53_coco')
    assert line == ('reset_class: 3 classes (person,bird,dog) from yolo3_darknet53_coco '
                    '(3 classes); class rows reused: person <- person; box and objectness '
                    'rows reused')
    assert 're-initialised' in reuse_summary(OLD, NEW, None, 'f.params')
    assert 'box and objectness rows reused' in reuse_summary(OLD, NEW, {}, 'f', True)


def test_a_zoo_name_is_found_in_the_model_store_with_the_zoo_datasets_classes(tmp_path,
                                                                                monkeypatch):
    import argparse  # pylint: disable=import-outside-toplevel
    from gluontrain.core import model_store  # pylint: disable=import-outside-toplevel
    from gluontrain.yolo3.transfer import ZOO_CLASSES, transfer_source  # noqa: E501  pylint: disable=import-outside-toplevel
    monkeypatch.setenv('MXNET_HOME', str(tmp_path))
    path = model_store.params_path('yolo3_mobilenet1.0_coco')
    assert path.startswith(str(tmp_path))
    os.makedirs(os.path.dirname(path))
    open(path, 'wb').close()  # a file put there by hand is used as it is (find_or_fetch)
    args = argparse.Namespace(transfer='yolo3_mobilenet1.0_coco', network='mobilenet1.0',
                              transfer_classes='')
    assert transfer_source(args) == (path, list(ZOO_CLASSES['coco']), 'yolo3_mobilenet1.0_coco')
    assert len(ZOO_CLASSES['coco']) == 80 and ZOO_CLASSES['coco'][0] == 'person'
    args.transfer_classes, args.transfer = 'a,b', path
    assert transfer_source(args) == (path, ['a', 'b'], path)
