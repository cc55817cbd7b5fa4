"""Image reading with one-line errors, truncation detection, one_line on worker reports."""
import io
import pickle

import pytest
from PIL import Image

from gluontrain.data import DatasetError
from gluontrain.data.images import (ImageMissingError, ImageReadError, looks_truncated,
                                    one_line, open_image, read_bgr, warn_size_mismatch)

# what torch's DataLoader passes to type(exc)(...) when a worker raised ValueError('bad x')
WORKER_REPORT = ('Caught ImageReadError in DataLoader worker process 0.\nOriginal Traceback '
                 '(most recent call last):\n  File "w.py", line 3, in f\n    raise X\n'
                 'gluontrain.data.images.ImageReadError: image a.jpg is empty (0 bytes): fix\n')


def _jpeg(size=(32, 24)):
    buf = io.BytesIO()
    Image.new('RGB', size, (30, 60, 90)).save(buf, format='JPEG')
    return buf.getvalue()


def test_worker_report_becomes_the_original_line():
    assert one_line(WORKER_REPORT) == 'image a.jpg is empty (0 bytes): fix'
    assert one_line('two\nlines') == 'two\nlines'  # only worker reports are cut
    for cls in (ImageReadError, ImageMissingError):
        assert str(cls(WORKER_REPORT)) == 'image a.jpg is empty (0 bytes): fix'
    assert str(DatasetError(WORKER_REPORT)) == 'image a.jpg is empty (0 bytes): fix'
    # pickled across processes (MXNet's worker pool) and rebuilt with the same message
    err = pickle.loads(pickle.dumps(ImageReadError('image b.png is not an image file')))
    assert isinstance(err, ValueError) and str(err) == 'image b.png is not an image file'


@pytest.mark.parametrize('content, reason', [
    (b'', 'is empty (0 bytes)'), (b'hello', 'is not an image file'),
    (_jpeg()[:200], 'is truncated (its data ends early)')])
def test_open_image_names_file_context_and_fix(tmp_path, content, reason):
    path = tmp_path / 'x.jpg'
    path.write_bytes(content)
    with pytest.raises(ImageReadError) as e:
        open_image(str(path), context='id 7 of a.json')
    assert str(e.value) == ('image {} {} (id 7 of a.json): restore the file (re-encode or '
                            're-download it), or remove the image from its dataset'.format(
                                path, reason))
    with pytest.raises(ImageMissingError, match=r'^image .*nope\.jpg does not exist: restore'):
        open_image(str(tmp_path / 'nope.jpg'))


def test_read_bgr_refuses_what_opencv_cannot_decode(tmp_path):
    path = tmp_path / 'x.jpg'
    path.write_bytes(b'')
    with pytest.raises(ImageReadError, match=r'is empty \(0 bytes\) \(ctx\)'):
        read_bgr(str(path), 'ctx')
    path.write_bytes(_jpeg())
    assert read_bgr(str(path)).shape == (24, 32, 3)


def test_looks_truncated(tmp_path):
    path = tmp_path / 'x.jpg'
    data = _jpeg()
    path.write_bytes(data)
    assert not looks_truncated(str(path))
    path.write_bytes(data + b'\0' * 10)  # padding after the end marker is tolerated
    assert not looks_truncated(str(path))
    path.write_bytes(data[:len(data) - 40])
    assert looks_truncated(str(path))
    png = tmp_path / 'x.png'
    Image.new('L', (8, 8)).save(str(png))
    assert not looks_truncated(str(png))
    png.write_bytes(png.read_bytes()[:-12])
    assert looks_truncated(str(png))


def test_warn_size_mismatch():
    assert not warn_size_mismatch('a.jpg', (4, 3), (4, 3), 'a.json', 'x')
    with pytest.warns(UserWarning, match=r'^a\.jpg is 4x3 but a\.json says 5x3; boxes kept\.$'):
        assert warn_size_mismatch('a.jpg', (4, 3), (5, 3), 'a.json', 'boxes kept')


def test_truncated_file_refused_even_after_gluoncv_relaxed_pil(tmp_path, monkeypatch):
    from PIL import ImageFile
    monkeypatch.setattr(ImageFile, 'LOAD_TRUNCATED_IMAGES', True)  # what importing gluoncv does
    path = tmp_path / 'x.jpg'
    path.write_bytes(_jpeg((64, 64))[:300])
    with pytest.raises(ImageReadError, match='is truncated'):
        open_image(str(path))
    assert ImageFile.LOAD_TRUNCATED_IMAGES  # restored
