"""The MessagePack codec against byte strings written from the specification."""
import io

import pytest

from gluontrain.data import msgpack as M

SPEC_CASES = [
    (None, b'\xc0'), (True, b'\xc3'), (False, b'\xc2'),
    (0, b'\x00'), (127, b'\x7f'), (128, b'\xcc\x80'), (256, b'\xcd\x01\x00'),
    (65536, b'\xce\x00\x01\x00\x00'), (2 ** 32, b'\xcf\x00\x00\x00\x01\x00\x00\x00\x00'),
    (-1, b'\xff'), (-32, b'\xe0'), (-33, b'\xd0\xdf'), (-129, b'\xd1\xff\x7f'),
    (-2 ** 31, b'\xd2\x80\x00\x00\x00'), (-2 ** 31 - 1, b'\xd3\xff\xff\xff\xff\x7f\xff\xff\xff'),
    (1.5, b'\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00'),
    ('', b'\xa0'), ('abc', b'\xa3abc'), ('é', b'\xa2\xc3\xa9'), ('x' * 32, b'\xd9\x20' + b'x' * 32),
    (b'\x01\x02', b'\xc4\x02\x01\x02'),
    ([1, 'a'], b'\x92\x01\xa1a'), ({'a': [1, 2]}, b'\x81\xa1a\x92\x01\x02'),
    (list(range(16)), b'\xdc\x00\x10' + bytes(range(16))),
]


@pytest.mark.parametrize('obj, packed', SPEC_CASES)
def test_spec_bytes_both_ways(obj, packed):
    assert M.packb(obj) == packed
    assert M.unpackb(packed) == obj


def test_forms_we_do_not_write_are_read():
    # float32, str16/32 and raw fixstr from older msgpack writers, array32, map16
    assert M.unpackb(b'\xca\x3f\xc0\x00\x00') == 1.5
    assert M.unpackb(b'\xda\x00\x02ab') == 'ab'
    assert M.unpackb(b'\xdb\x00\x00\x00\x01a') == 'a'
    assert M.unpackb(b'\xdd\x00\x00\x00\x01\xc0') == [None]
    assert M.unpackb(b'\xde\x00\x01\x01\x02') == {1: 2}


def test_seamseg_metadata_round_trip_through_files():
    meta = {'meta': {'num_stuff': 1, 'num_thing': 2, 'categories': ['bg', 'a', 'b'],
                     'palette': [(0, 0, 0), (255, 0, 0), (0, 255, 0)],
                     'original_ids': [0, 1, 3]},
            'images': [{'id': '000001', 'cat': [255, 0, 1, 2], 'size': (120, 160),
                        'iscrowd': [0, 0, 0, 1]}]}
    buf = io.BytesIO()
    M.dump(meta, buf)
    buf.seek(0)
    back = M.load(buf)
    assert back['images'][0]['size'] == [120, 160]  # tuples come back as lists, as umsgpack
    assert back['meta']['categories'] == ['bg', 'a', 'b']


def test_errors():
    with pytest.raises(M.MsgpackError, match='truncated'):
        M.unpackb(b'\x92\x01')
    with pytest.raises(M.MsgpackError, match='trailing'):
        M.unpackb(b'\x01\x02')
    with pytest.raises(M.MsgpackError, match='0xd4'):
        M.unpackb(b'\xd4\x01\x00')
    with pytest.raises(M.MsgpackError, match='cannot pack'):
        M.packb({1, 2})
