"""Reported state-dict loads and safe reads of weights files."""
import logging
import os
import pickle

import pytest
import torch
from torch import nn

from gluontrain.core.load_report import WeightsLoadError
from gluontrain.torch.checkpoint import WeightsMismatchError
from gluontrain.torch.weights import (load_state_dict_reported, read_weights_file,
                                      strip_ddp_prefix, tensor_shapes)

FIX = 'pass weights of this model'


def _net(classes=3, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Linear(4, classes))


def test_full_load_copies_everything_and_logs(caplog):
    source, target = _net(seed=1), _net(seed=2)
    with caplog.at_level(logging.INFO, logger='gluontrain.torch.weights'):
        report = load_state_dict_reported(target, source.state_dict(), 'w.pth', '--resume', FIX)
    # conv w/b, bn w/b/mean/var/num_batches_tracked, linear w/b
    assert (len(report.loaded), report.total, report.missing, report.unexpected) == (9, 9, [], [])
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(),
                                                 target.state_dict().values()))
    assert caplog.messages == ['loaded 9 of 9 tensors from w.pth (0 missing, 0 unexpected, '
                               '0 wrong shape)']


def test_ddp_prefix_and_missing_num_batches_tracked():
    source, target = _net(seed=1), _net(seed=2)
    saved = {'module.' + k: v for k, v in source.state_dict().items()
             if not k.endswith('num_batches_tracked')}
    report = load_state_dict_reported(nn.DataParallel(target), saved, 'ddp.pth', '--resume', FIX)
    assert (len(report.loaded), report.total, report.ignored) == (
        8, 8, ['1.num_batches_tracked'])
    assert torch.equal(target[2].weight, source[2].weight)
    assert strip_ddp_prefix({'module.a': 1, 'b': 2}) == {'module.a': 1, 'b': 2}


def test_partial_load_reports_and_keeps_the_rest():
    source, target = _net(classes=5, seed=1), _net(classes=3, seed=2)
    kept = target[2].weight.detach().clone()
    with pytest.raises(WeightsLoadError) as info:
        load_state_dict_reported(target, source.state_dict(), 'p.pth', '--resume', FIX)
    assert str(info.value) == (
        "--resume p.pth: loaded 7 of 9 tensors (0 missing, 0 unexpected, 2 wrong shape); "
        "wrong shape '2.weight' ((5, 4) in the file, (3, 4) in the model) and 1 more; " + FIX)
    # refused before anything was copied
    assert not torch.equal(target[0].weight, source[0].weight)
    report = load_state_dict_reported(target, source.state_dict(), 'p.pth', '--pre_train', FIX,
                                      allow_partial=True)
    assert [m[0] for m in report.mismatched] == ['2.weight', '2.bias']
    assert torch.equal(target[0].weight, source[0].weight) and torch.equal(target[2].weight, kept)


def test_zero_loaded_names_the_origin():
    ssd_like = {'vgg.0.weight': torch.zeros(1), 'loc.0.weight': torch.zeros(1)}
    with pytest.raises(WeightsLoadError, match=r'^--resume s.pth: loaded 0 of 8 tensors; it '
                                               r'looks like an ssd.pytorch SSD300 state_dict; '):
        load_state_dict_reported(_net(), ssd_like, 's.pth', '--resume', FIX, allow_partial=True)
    with pytest.raises(WeightsLoadError, match='holds a list, not a state_dict'):
        load_state_dict_reported(_net(), [1], 'l.pth', '--resume', FIX)


def test_mapping_and_dtype_cast():
    target = nn.Linear(2, 2)
    saved = {'fc.w': torch.ones(2, 2, dtype=torch.float64), 'fc.b': torch.zeros(2)}
    report = load_state_dict_reported(target, saved, 'm.pth', '--w', FIX,
                                      mapping={'weight': 'fc.w', 'bias': 'fc.b'})
    assert report.loaded == ['weight', 'bias'] and target.weight.dtype == torch.float32
    assert torch.equal(target.weight, torch.ones(2, 2))
    assert tensor_shapes({'a': torch.zeros(2, 3), 'b': 1}) == {'a': (2, 3), 'b': None}


class _Hostile:
    def __reduce__(self):
        return (os.system, ('echo hostile',))


def _one_line(error):
    assert '\n' not in str(error) and 'Traceback' not in str(error)
    return str(error)


def test_read_weights_file_failures_are_one_line(tmp_path):
    good = tmp_path / 'good.pth'
    torch.save({'a': torch.ones(2)}, str(good))
    assert torch.equal(read_weights_file(str(good), '--w', FIX)['a'], torch.ones(2))
    legacy = tmp_path / 'legacy.pth'  # pre-1.6 torch.save format (vgg16_reducedfc.pth is one)
    torch.save({'0.weight': torch.ones(1)}, str(legacy), _use_new_zipfile_serialization=False)
    assert list(read_weights_file(str(legacy), '--w', FIX)) == ['0.weight']

    with pytest.raises(FileNotFoundError, match=r'^--w .*nope.pth does not exist; ' + FIX):
        read_weights_file(str(tmp_path / 'nope.pth'), '--w', FIX)
    empty = tmp_path / 'empty.pth'
    empty.write_bytes(b'')
    truncated = tmp_path / 'trunc.pth'
    truncated.write_bytes(good.read_bytes()[:200])
    hostile = tmp_path / 'hostile.pth'
    torch.save({'x': _Hostile()}, str(hostile))
    hostile_pickle = tmp_path / 'hostile.pkl'
    hostile_pickle.write_bytes(pickle.dumps(_Hostile()))
    text = tmp_path / 'notes.txt'
    text.write_text('hello\n')
    mx = tmp_path / 'yolo3.params'
    mx.write_bytes((0x112).to_bytes(8, 'little') + b'\0' * 16)
    expected = {empty: 'is empty (0 bytes', truncated: 'is truncated or corrupt (200 bytes',
                hostile: 'holds objects other than tensors (posix.system)',
                hostile_pickle: 'holds objects other than tensors (Unsupported operand',
                text: 'is not a torch.save file', mx: 'is an MXNet .params file'}
    for path, reason in expected.items():
        with pytest.raises(WeightsLoadError) as info:
            read_weights_file(str(path), '--w', FIX)
        message = _one_line(info.value)
        assert message.startswith('--w {} {}'.format(path, reason)), message
        assert message.endswith('; ' + FIX)


def test_gluontrain_checkpoint_is_named(tmp_path):
    from gluontrain.torch.checkpoint import save_checkpoint
    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    path = str(tmp_path / 'run_last.ckpt')
    save_checkpoint(path, model, optimizer, None, 0, 1, 0.0, {'a': 1})
    with pytest.raises(WeightsLoadError, match='is a gluontrain training checkpoint'):
        read_weights_file(path, '--basenet', FIX)


def test_weights_mismatch_error_is_a_load_error():
    assert issubclass(WeightsMismatchError, WeightsLoadError)
    assert issubclass(WeightsMismatchError, RuntimeError)
    assert issubclass(WeightsLoadError, ValueError)


def test_restore_checkpoint_of_another_network_is_one_line(tmp_path):
    from gluontrain.torch.checkpoint import restore_checkpoint, save_checkpoint
    model = _net(classes=5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    path = str(tmp_path / 'run_last.ckpt')
    save_checkpoint(path, model, optimizer, None, 0, 1, 0.0, {'a': 1})
    other = _net(classes=3, seed=4)
    before = other[0].weight.detach().clone()
    with pytest.raises(WeightsMismatchError) as info:
        restore_checkpoint(path, other, torch.optim.SGD(other.parameters(), lr=0.1))
    assert _one_line(info.value) == (
        "--resume {}: loaded 7 of 9 tensors (0 missing, 0 unexpected, 2 wrong shape); wrong "
        "shape '2.weight' ((5, 4) in the file, (3, 4) in the model) and 1 more; resume with "
        "the network and number of classes the checkpoint was written with, or start a new "
        "run without --resume".format(path))
    assert torch.equal(other[0].weight, before)  # nothing loaded
    bigger = nn.Sequential(*list(_net(classes=5)), nn.Linear(5, 2))
    save_checkpoint(path, bigger, torch.optim.SGD(bigger.parameters(), lr=0.1), None, 0, 1,
                    0.0, {'a': 1})
    with pytest.raises(WeightsMismatchError, match=r'loaded 9 of 9 tensors \(0 missing, 2 '
                                                   r'unexpected, 0 wrong shape\); unexpected '
                                                   r'3.\{bias, weight\}; resume with'):
        restore_checkpoint(path, model, optimizer)


def test_text_files_and_folders_are_named_for_what_they_are(tmp_path):
    text = tmp_path / 'notes.pth'
    text.write_text('not weights at all')
    with pytest.raises(WeightsLoadError, match=r"is not a torch.save file \(it starts with "
                                               r"b'not weig'\); pass") as err:
        read_weights_file(str(text), '--resume', 'pass a .pth')
    assert 'objects other than tensors' not in str(err.value)
    with pytest.raises(WeightsLoadError, match='is a folder, not a weights file'):
        read_weights_file(str(tmp_path), '--resume', 'pass a .pth')
