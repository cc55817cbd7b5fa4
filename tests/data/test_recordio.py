"""GluonCV's ``.lst`` and RecordIO (``.rec`` + ``.idx``) read and written without MXNet.

The committed files under tests/fixtures/recordio/ were written by MXNet (``MXIndexedRecordIO``
+ ``pack_img``, as ``tools/im2rec.py`` does) with what gluoncv's ``LstDetection`` and
``RecordFileDetection`` read from them (make_recordio_fixtures.py), so the readers are checked
without MXNet; where mxnet and gluoncv are importable the same comparisons run live.
"""
import hashlib
import importlib.util
import json
import multiprocessing
import os
import pickle
import shutil
import struct

import cv2
import numpy as np
import pytest

from fixtures.make_recordio_fixtures import IMAGES, LISTS, image_bgr, image_file, write_line
from gluontrain.data import DatasetError
from gluontrain.data import recordio
from gluontrain.data.custom_detection import LstDetection, RecordFileDetection
from gluontrain.data.images import ImageMissingError, ImageReadError

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'fixtures',
                        'recordio')
HAS_GLUONCV = all(importlib.util.find_spec(m) is not None for m in ('mxnet', 'gluoncv'))
needs_gluoncv = pytest.mark.skipif(not HAS_GLUONCV, reason='mxnet / gluoncv not installed: the '
                                   'live comparison with gluoncv.data.LstDetection / '
                                   'RecordFileDetection and mx.recordio needs them')
M = struct.pack('<I', recordio.MAGIC)
# records that exercise the framing: magic words at and off 4-byte boundaries, empty, odd sizes
EDGE_RECORDS = [b'', b'a', b'abcd', M, b'ab' + M + b'cd', b'abcd' + M + b'x', M + M + b'xyz' + M,
                b'12345' + M + M + b'ab', bytes(range(256)) * 3 + M]


def _expected():
    with open(os.path.join(FIXTURES, 'expected.json')) as f:
        return json.load(f)


def _dataset(name, kind, root=FIXTURES, **kwargs):
    normalized = LISTS[name][4]
    if kind == 'lst':
        return LstDetection(os.path.join(root, name + '.lst'), root=root,
                            coord_normalized=normalized, **kwargs)
    return RecordFileDetection(os.path.join(root, name + '.rec'), coord_normalized=normalized,
                               **kwargs)


def _sha(data):
    return hashlib.sha256(data).hexdigest()


def _assert_items(dataset, items):
    assert len(dataset) == len(items)
    for idx, want in enumerate(items):
        img, label = dataset[idx]
        assert img.dtype == np.uint8 and list(img.shape) == want['image_shape']
        assert _sha(np.ascontiguousarray(img).tobytes()) == want['image_sha256'], idx
        assert str(label.dtype) == want['label_dtype'] and list(label.shape) == \
            want['label_shape']
        assert label.tolist() == want['label'], idx  # exactly


# ------------------------------------------------------------------ against the recorded files
@pytest.mark.parametrize('kind', ['lst', 'rec'])
@pytest.mark.parametrize('name', sorted(LISTS))
def test_items_equal_what_gluoncv_read(name, kind):
    _assert_items(_dataset(name, kind), _expected()['{}.{}'.format(name, kind)]['items'])


@pytest.mark.parametrize('name', sorted(LISTS))
def test_reader_returns_the_records_mxnet_read(name):
    want = _expected()[name + '.rec']
    path = os.path.join(FIXTURES, name + '.rec')
    reader = recordio.IndexedRecordReader(path)
    assert reader.keys == want['keys'] and len(reader) == len(want['keys'])
    records = [reader.read(key) for key in reader.keys]
    assert [_sha(r) for r in records] == want['record_sha256']
    assert [recordio.unpack(r)[0].id for r in records] == want['ids']
    assert [r for _, r in recordio.iter_records(path)] == records
    assert list(recordio.read_idx(reader.idx_path).values()) == \
        [off for off, _ in recordio.iter_records(path)]


def test_b_rec_holds_records_written_in_parts():
    """b.lst's extra header value is the float32 spelled by the magic word: MXNet split each
    record there (part flags 1 then 3), and the reader joins the parts."""
    with open(os.path.join(FIXTURES, 'b.rec'), 'rb') as f:
        head = struct.unpack('<II', f.read(8))
    assert head[0] == recordio.MAGIC and head[1] >> 29 == 1 and head[1] & 0xfff == 32
    header, _ = recordio.unpack(recordio.IndexedRecordReader(
        os.path.join(FIXTURES, 'b.rec')).read(0))
    assert header.label[2].tobytes() == M and _expected()['magic_float'] == float(header.label[2])


@pytest.mark.parametrize('name', sorted(LISTS))
def test_writer_rewrites_mxnets_files_byte_for_byte(name, tmp_path):
    """Every record of an MXNet-written .rec, written again by IndexedRecordWriter under its
    key, gives the same .rec and .idx; write_index rebuilds the .idx from the .rec alone."""
    src = os.path.join(FIXTURES, name + '.rec')
    reader = recordio.IndexedRecordReader(src)
    out = str(tmp_path / (name + '.rec'))
    with recordio.IndexedRecordWriter(out) as writer:
        for key in reader.keys:
            writer.write_idx(key, reader.read(key))
    for ext in ('.rec', '.idx'):
        with open(src[:-4] + ext, 'rb') as a, open(out[:-4] + ext, 'rb') as b:
            assert a.read() == b.read(), ext
    os.remove(out[:-4] + '.idx')
    recordio.write_index(out)
    with open(src[:-4] + '.idx') as a, open(out[:-4] + '.idx') as b:
        assert a.read() == b.read()


def test_writer_framing_round_trip(tmp_path):
    path = str(tmp_path / 'e.rec')
    with recordio.IndexedRecordWriter(path) as writer:
        for key, rec in enumerate(EDGE_RECORDS):
            writer.write_idx(key * 3, rec)
    reader = recordio.IndexedRecordReader(path)
    assert reader.keys == [3 * k for k in range(len(EDGE_RECORDS))]
    assert [reader.read(k) for k in reader.keys] == EDGE_RECORDS
    assert [r for _, r in recordio.iter_records(path)] == EDGE_RECORDS
    assert os.path.getsize(path) % 4 == 0


def test_pack_unpack_round_trip():
    for label in (3.5, [1, 2.5, -4], np.arange(7, dtype=np.float64) / 3):
        packed = recordio.pack(recordio.IRHeader(9, label, 12345, 6), b'payload')
        header, payload = recordio.unpack(packed)
        assert payload == b'payload' and header.id == 12345 and header.id2 == 6
        if isinstance(label, float):
            assert header.flag == 0 and header.label == label
        else:
            assert header.flag == len(label) and header.label.dtype == np.float32
            np.testing.assert_array_equal(header.label, np.asarray(label, np.float32))


def test_detection_label_and_lst_line_give_the_tutorials_values(tmp_path):
    """lst_line(detection_label(...)) holds the values GluonCV's tutorial write_line writes,
    and LstDetection reads both alike."""
    ours, theirs = [], []
    for i, ((h, w), objects) in enumerate(IMAGES):
        objs = np.array(objects, dtype=np.float64)
        theirs.append(write_line(image_file(i), (h, w), objs[:, 1:5], objs[:, 0], i, 'size',
                                 objs[:, 5]))
        ours.append(recordio.lst_line(i, recordio.detection_label(
            objs[:, 1:5], objs[:, 0], w, h, extra=objs[:, 5:], header=(w, h)), image_file(i)))
    for a, b in zip(ours, theirs):
        fa, fb = a.strip().split('\t'), b.strip().split('\t')
        assert fa[0] == fb[0] and fa[-1] == fb[-1]
        assert [float(v) for v in fa[1:-1]] == [float(v) for v in fb[1:-1]]
    (tmp_path / 'ours.lst').write_text(''.join(ours))
    data = LstDetection(str(tmp_path / 'ours.lst'), root=FIXTURES, classes='abcde')
    assert data[2][1].shape == (3, 6) and data[2][1][:, 4].tolist() == [3, 0, 1]


# ------------------------------------------------------------ processes, views, grey images
def _first_label(dataset):
    return dataset[0][1].tolist()


def test_pickled_and_forked_copies_read_through_their_own_handle():
    data = _dataset('b', 'rec')
    want = data[0][1].tolist()
    copy = pickle.loads(pickle.dumps(data))
    assert copy._record._file is None and _first_label(copy) == want
    with multiprocessing.get_context('fork').Pool(1) as pool:
        assert pool.apply(_first_label, (data,)) == want
    assert _first_label(data) == want  # the parent's handle still reads


def test_transform_view_and_grey_flag():
    data = _dataset('a', 'lst', classes=['c%d' % i for i in range(5)])
    view = data.transform(lambda img, label: (img.shape, label[:, 4]))
    assert view[1][0] == data[1][0].shape and view[1][1].tolist() == [1.0]
    assert data._transform is None and data.classes == tuple('c%d' % i for i in range(5))
    grey = LstDetection(os.path.join(FIXTURES, 'a.lst'), root=FIXTURES, flag=0)
    assert grey[0][0].shape == (48, 64, 1)


# ------------------------------------------------------------------------------- malformed
def _copy(tmp_path):
    root = str(tmp_path / 'd')
    shutil.copytree(FIXTURES, root)
    return root


def _patch(path, offset, data):
    with open(path, 'r+b') as f:
        f.seek(offset)
        f.write(data)


def _rec_with_labels(root, labels, payload=None):
    path = os.path.join(root, 'w.rec')
    img = payload if payload is not None else recordio.pack_img(
        (0, 0, 0, 0), image_bgr(0))[24:]
    with recordio.IndexedRecordWriter(path) as writer:
        for key, label in enumerate(labels):
            writer.write_idx(key, recordio.pack(recordio.IRHeader(0, label, key, 0), img))
    return path


def _raw_rec(root, records):
    path = os.path.join(root, 'w.rec')
    with recordio.IndexedRecordWriter(path) as writer:
        for key, rec in enumerate(records):
            writer.write_idx(key, rec)
    return path


def _offset(root, name, key):
    return recordio.read_idx(os.path.join(root, name + '.idx'))[key]


GOOD = [2, 5, 0, .1, .1, .5, .5]
REC_CASES = {
    'bad magic': (lambda r: _patch(os.path.join(r, 'a.rec'), _offset(r, 'a', 12), b'JUNK'),
                  'a.rec', 'not the RecordIO magic number', 'write_index('),
    'bad part flag': (lambda r: _patch(os.path.join(r, 'a.rec'), _offset(r, 'a', 11) + 7,
                                       b'\x40'), 'a.rec', 'part flag 2', 'im2rec.py'),
    'truncated': (lambda r: open(os.path.join(r, 'a.rec'), 'r+b').truncate(
        _offset(r, 'a', 7) + 100), 'a.rec', 'cut short', 'im2rec.py'),
    'idx past the end': (lambda r: open(os.path.join(r, 'a.idx'), 'a').write('99\t1000000\n'),
                         'a.idx', 'past the end of', 'write_index('),
    'missing idx': (lambda r: os.remove(os.path.join(r, 'a.idx')), 'a.rec', 'has no index',
                    'write_index('),
    'idx line': (lambda r: open(os.path.join(r, 'a.idx'), 'a').write('x 3\n'), 'a.idx line 7',
                 'not key<TAB>byte offset', 'im2rec.py'),
    'duplicate key': (lambda r: open(os.path.join(r, 'a.idx'), 'a').write('10\t0\n'), 'a.idx',
                      'lists key 10 on lines 1 and 7', 'number the .lst'),
    'label count in header': (lambda r: _patch(os.path.join(r, 'a.rec'), _offset(r, 'a', 10) + 8,
                                               struct.pack('<I', 4000)), 'a.rec record 10',
                              'announces 4000 label values', 'im2rec.py'),
    'width does not divide': (lambda r: _rec_with_labels(r, [GOOD, GOOD + [0]]), 'w.rec record 1',
                              'label width B=5 does not divide', 'fix A, B or the objects'),
    'outside [0, 1]': (lambda r: _rec_with_labels(r, [[2, 5, 0, .1, .1, 1.2, .5]]),
                       'w.rec record 0', 'lies outside [0, 1]', 'coord_normalized=False'),
    'class id': (lambda r: _rec_with_labels(r, [[2, 5, 7, .1, .1, .5, .5]]), 'w.rec record 0',
                 'class id 7 is not one of the 5 classes', 'class list'),
    'short record': (lambda r: _raw_rec(r, [b'abc']), 'w.rec record 0',
                     'fewer than the 24-byte IRHeader', 'im2rec.py'),
    'scalar label': (lambda r: _rec_with_labels(r, [3.0]), 'w.rec record 0',
                     'not a detection label', '--pack-label'),
}


@pytest.mark.parametrize('case', sorted(REC_CASES))
def test_malformed_recordio_is_refused_in_one_line(case, tmp_path):
    root = _copy(tmp_path)
    corrupt, where, what, fix = REC_CASES[case]
    made = corrupt(root)
    path = made if isinstance(made, str) and made.endswith('.rec') else \
        os.path.join(root, 'a.rec')
    with pytest.raises(DatasetError) as e:
        RecordFileDetection(path, classes='abcde')
    msg = str(e.value)
    assert '\n' not in msg and os.path.join(root, where) in msg and what in msg and fix in msg, \
        msg


def test_undecodable_record_image_and_pixel_boxes(tmp_path):
    root = _copy(tmp_path)
    data = RecordFileDetection(_rec_with_labels(root, [GOOD], payload=b'not an image'))
    with pytest.raises(ImageReadError, match=r'^the image of .*w\.rec record 0 \(byte 0\) is not '
                       r'an image OpenCV can decode: rewrite the record'):
        _ = data[0]
    path = _rec_with_labels(root, [[2, 5, 0, 1, 1, 65, 20]])  # image 0 is 64 px wide
    with pytest.raises(DatasetError, match=r'w\.rec record 0 .*object 0 box \(xmin=1, ymin=1, '
                       r'xmax=65, ymax=20\) lies outside the 64x48 image .*clip it'):
        _ = RecordFileDetection(path, coord_normalized=False)[0]


def _edit_line(root, name, lineno, fn):
    path = os.path.join(root, name + '.lst')
    with open(path) as f:
        lines = f.readlines()
    lines[lineno - 1] = fn(lines[lineno - 1])
    with open(path, 'w') as f:
        f.writelines(lines)


def _field(i, value):
    def fn(line):
        fields = line.rstrip('\n').split('\t')
        fields[i] = value
        return '\t'.join(fields) + '\n'
    return fn


LST_CASES = {
    'image missing': (lambda r: os.remove(os.path.join(r, 'images', 'img2.jpg')), 'a.lst line 3',
                      'img2.jpg does not exist', 'pass the folder'),
    'outside [0, 1]': (lambda r: _edit_line(r, 'a', 2, _field(8, '1.5')), 'a.lst line 2',
                       'xmax=1.5, ymax=0.482812) lies outside [0, 1]', 'clip them'),
    'width does not divide': (lambda r: _edit_line(r, 'b', 1, _field(2, '5')), 'b.lst line 1',
                              'label width B=5 does not divide', 'fix A, B'),
    'class id': (lambda r: _edit_line(r, 'a', 1, _field(5, '6')), 'a.lst line 1',
                 'class id 6 is not one of the 5 classes', 'class list'),
    'degenerate box': (lambda r: _edit_line(r, 'a', 1, _field(8, '0.01')), 'a.lst line 1',
                       'is degenerate', 'fix or delete it'),
    'no object': (lambda r: _edit_line(r, 'a', 2, lambda l: '\t'.join(
        l.split('\t')[:5] + ['images/img1.jpg\n'])), 'a.lst line 2', 'has no object',
        'remove the image'),
    'not a number': (lambda r: _edit_line(r, 'a', 3, _field(6, 'zero')), 'a.lst line 3',
                     "field 7 ('zero') is not a number", 'must be one'),
    'too few fields': (lambda r: _edit_line(r, 'a', 4, lambda l: '\n'), 'a.lst line 4',
                       'has 1 tab-separated field', 'delete the line'),
    'bad header': (lambda r: _edit_line(r, 'a', 1, _field(1, '1')), 'a.lst line 1',
                   'header width A=1', 'Prepare custom datasets'),
}


@pytest.mark.parametrize('case', sorted(LST_CASES))
def test_malformed_lst_is_refused_in_one_line(case, tmp_path):
    root = _copy(tmp_path)
    corrupt, where, what, fix = LST_CASES[case]
    corrupt(root)
    with pytest.raises(DatasetError) as e:
        LstDetection(os.path.join(root, where.split(' ')[0]), root=root, classes='abcde')
    msg = str(e.value)
    assert '\n' not in msg and os.path.join(root, where) in msg and what in msg and fix in msg, \
        msg


def test_lst_image_problems_when_read(tmp_path):
    root = _copy(tmp_path)
    data = LstDetection(os.path.join(root, 'c.lst'), root=root, coord_normalized=False)
    shutil.copy(os.path.join(root, 'a.lst'), os.path.join(root, 'images', 'img0.jpg'))
    with pytest.raises(ImageReadError, match=r'^image .*img0\.jpg \(.*c\.lst line 1\) is not an '
                       r'image OpenCV can decode: restore the file .* or delete .*c\.lst line 1$'):
        _ = data[0]
    os.remove(os.path.join(root, 'images', 'img0.jpg'))
    with pytest.raises(ImageMissingError, match=r'img0\.jpg does not exist: restore'):
        _ = data[0]
    # a box past the 40 px image, in pixels
    shutil.copy(os.path.join(FIXTURES, 'images', 'img0.jpg'), os.path.join(root, 'images'))
    _edit_line(root, 'c', 2, _field(6, '41'))
    with pytest.raises(DatasetError, match=r'c\.lst line 2: object 0 box .*xmax=41.* lies '
                       r'outside the 40x40 image \(coord_normalized=False: pixels\); clip it'):
        _ = LstDetection(os.path.join(root, 'c.lst'), root=root, coord_normalized=False)[1]
    # cut short: OpenCV 4 decodes it (the missing part grey) and a warning names the file;
    # OpenCV 5 refuses it
    with open(os.path.join(FIXTURES, 'images', 'img2.jpg'), 'rb') as f:
        cut = f.read()[:1000]
    with open(os.path.join(root, 'images', 'img2.jpg'), 'wb') as f:
        f.write(cut)
    cut_data = LstDetection(os.path.join(root, 'a.lst'), root=root)
    if cv2.imdecode(np.frombuffer(cut, np.uint8), cv2.IMREAD_COLOR) is None:
        with pytest.raises(ImageReadError, match=r'img2\.jpg \(.*a\.lst line 3\) is cut short '
                           r'\(no end marker\) and this OpenCV refuses it: restore the file'):
            _ = cut_data[2]
    else:
        with pytest.warns(UserWarning, match=r'img2\.jpg \(.*a\.lst line 3\) lacks its end '
                          r'marker \(cut short\): OpenCV decodes the missing part'):
            _ = cut_data[2]


def test_missing_files_are_named(tmp_path):
    with pytest.raises(DatasetError, match=r'nope\.rec does not exist: pass the \.rec path'):
        RecordFileDetection(str(tmp_path / 'nope.rec'))
    with pytest.raises(DatasetError, match=r'nope\.lst does not exist'):
        LstDetection(str(tmp_path / 'nope.lst'))


# ----------------------------------------------------------------------- live, with MXNet
def _import_gluoncv():
    import gluontrain.mx  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    import gluoncv  # pylint: disable=import-outside-toplevel
    import mxnet as mx  # pylint: disable=import-outside-toplevel
    return mx, gluoncv


@needs_gluoncv
def test_live_fixtures_regenerate_identically(tmp_path):
    """make_recordio_fixtures.write here gives the committed files byte for byte, its
    expected.json from gluoncv's readers on this run."""
    from fixtures.make_recordio_fixtures import write  # pylint: disable=import-outside-toplevel
    write(str(tmp_path))
    for folder, _, files in os.walk(FIXTURES):
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), FIXTURES)
            with open(os.path.join(folder, name), 'rb') as a, open(tmp_path / rel, 'rb') as b:
                assert a.read() == b.read(), rel


@needs_gluoncv
def test_live_our_writer_read_by_gluoncv_and_mxnet(tmp_path):
    """A detection .rec written with IndexedRecordWriter + pack_img: gluoncv's
    RecordFileDetection reads what ours reads; MXIndexedRecordIO writes the same bytes for the
    framing's edge cases and reads ours back; grey LstDetection(flag=0) matches too."""
    mx, gluoncv = _import_gluoncv()
    path = str(tmp_path / 'w.rec')
    with recordio.IndexedRecordWriter(path) as writer:
        for i, ((h, w), objects) in enumerate(IMAGES):
            objs = np.array(objects, dtype=np.float64)
            label = recordio.detection_label(objs[:, 1:5], objs[:, 0], w, h, extra=objs[:, 5:])
            header = recordio.IRHeader(0, label, 100 + i, 0)
            packed = recordio.pack_img(header, image_bgr(i), quality=80)
            assert packed == mx.recordio.pack_img(header, image_bgr(i), quality=80)
            writer.write_idx(100 + i, packed)
    theirs, ours = gluoncv.data.RecordFileDetection(path), RecordFileDetection(path)
    for idx in range(len(IMAGES)):
        (img_t, lab_t), (img_o, lab_o) = theirs[idx], ours[idx]
        np.testing.assert_array_equal(img_o, img_t.asnumpy())
        assert lab_o.dtype == lab_t.dtype and lab_o.tolist() == lab_t.tolist()
    mxw = mx.recordio.MXIndexedRecordIO(str(tmp_path / 'm.idx'), str(tmp_path / 'm.rec'), 'w')
    with recordio.IndexedRecordWriter(str(tmp_path / 'e.rec')) as writer:
        for key, rec in enumerate(EDGE_RECORDS):
            writer.write_idx(key, rec)
            mxw.write_idx(key, rec)
    mxw.close()
    for ext in ('.rec', '.idx'):
        assert (tmp_path / ('e' + ext)).read_bytes() == (tmp_path / ('m' + ext)).read_bytes()
    mxr = mx.recordio.MXIndexedRecordIO(str(tmp_path / 'e.idx'), str(tmp_path / 'e.rec'), 'r')
    assert [mxr.read_idx(k) for k in mxr.keys] == EDGE_RECORDS
    mxr.close()
    for label in (3.5, [1.0, 2.5, -4.0]):
        header = mx.recordio.IRHeader(0, label, 7, 1)
        assert recordio.pack(header, b'xy') == mx.recordio.pack(header, b'xy')
    lst = os.path.join(FIXTURES, 'a.lst')
    grey_t = gluoncv.data.LstDetection(lst, root=FIXTURES, flag=0)
    grey_o = LstDetection(lst, root=FIXTURES, flag=0)
    for idx in range(len(grey_o)):
        np.testing.assert_array_equal(grey_o[idx][0], grey_t[idx][0].asnumpy())
