"""tests/env_split.py: README command (b) runs each test once, and a test left to torch-py313
is one that passes there and means the same thing in both environments."""
import configparser
import os
import types

import env_split

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_what_an_environment_has_installed_is_never_left_to_one():
    assert env_split.listable('tests/torch/yolo3/test_yolo3_torch_step.py::test_a[fp32]')
    for nodeid in ('tests/torch/ops/test_compiled.py::test_nms_rules_keep_what_ours_keeps[x]',
                   'tests/yolo3/test_backend_python.py::test_the_refusal_names_the_python',
                   'tests/torch/yolo3/test_yolo3_torch_infer.py::test_the_torch_scripts_import_'
                   'no_mxnet'):
        assert not env_split.listable(nodeid), nodeid


def test_write_read_round_trip_sorted_once_and_only_the_listable(tmp_path):
    path = str(tmp_path / 'list.txt')
    env_split.write_list(path, ['tests/b.py::t', 'tests/a.py::t[2]', 'tests/b.py::t',
                                'tests/torch/ops/test_compiled.py::t', 'tests/a.py::t[1]'],
                         'Python 3.13.0, numpy 2.5.5, 2026-11-30')
    assert env_split.read_list(path) == ['tests/a.py::t[1]', 'tests/a.py::t[2]', 'tests/b.py::t']
    with open(path) as f:
        assert 'made on Python 3.13.0, numpy 2.5.5, 2026-11-30' in f.read()


def test_split_and_not_passed():
    items = [types.SimpleNamespace(nodeid=n) for n in ('a::1', 'a::2', 'b::1', 'c::1')]
    kept, deselected = env_split.split_items(items, ['b::1', 'a::1', 'gone::1'])
    assert [i.nodeid for i in kept] == ['a::2', 'c::1']
    assert [i.nodeid for i in deselected] == ['a::1', 'b::1']
    assert env_split.not_passed(['b::1', 'a::1', 'gone::1'], {'a::1', 'x::1'}) == ['b::1', 'gone::1']


def test_the_committed_list_is_what_torch_py313_runs():
    """Every listed test lies in the paths tox.ini gives torch-py313, is listable, once, sorted;
    and both environments' commands use the list (py311 leaves, torch-py313 must pass)."""
    listed = env_split.read_list(env_split.LIST_FILE)
    assert len(listed) > 100 and listed == sorted(set(listed))
    assert all(env_split.listable(n) for n in listed)
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(os.path.join(ROOT, 'tox.ini'))
    paths = tox['testenv:torch']['tests'].split()
    for nodeid in listed:
        module = nodeid.split('::', 1)[0]
        assert os.path.isfile(os.path.join(ROOT, module)), nodeid
        assert any(module == p or module.startswith(p.rstrip('/') + '/') for p in paths), nodeid
    rel = os.path.relpath(env_split.LIST_FILE, ROOT)
    assert '--tested-elsewhere ' + rel in tox['testenv']['commands']
    assert '--must-pass ' + rel in tox['testenv:torch-py{312,313}']['commands']
