"""imread_rgb: the pixels of mx.image.imread(path, 1), for every kind of file it decodes itself."""
import numpy as np
import pytest

import gluontrain.mx  # noqa: F401  (imports gluoncv through the shim)
import mxnet as mx
from PIL import Image

from gluontrain.mx.image import decodes_like_mxnet, imread_rgb


@pytest.fixture(scope='module')
def picture():
    """A smooth 'photo' with edges: what JPEG's chroma subsampling and IDCT round."""
    rng = np.random.RandomState(0)
    y, x = np.mgrid[0:75, 0:101]
    img = np.stack([x * 2.5, y * 3.3, (x + y) * 1.4], 2) + rng.normal(0, 20, (75, 101, 3))
    img[20:50, 30:60] = (250, 10, 120)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def _save(image, path, **kwargs):
    image.save(str(path), **kwargs)
    return str(path)


def _files(picture, folder):
    files = [_save(picture, folder / 'q{}_s{}_p{}.jpg'.format(q, s, p), quality=q,
                   subsampling=s, progressive=p)
             for q in (40, 95) for s in (0, 1, 2) for p in (False, True)]
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated: MXNet's decoder ignores it, cv2.imread would turn the image
    files.append(_save(picture, folder / 'exif6.jpg', exif=exif))
    files.append(_save(picture.convert('L'), folder / 'grey.jpg'))
    files.append(_save(picture.convert('CMYK'), folder / 'cmyk.jpg'))
    for mode in ('RGBA', 'L', 'P'):
        files.append(_save(picture.convert(mode), folder / '{}.png'.format(mode)))
    files.append(_save(Image.fromarray(np.asarray(picture.convert('L')).astype(np.uint16) * 257),
                       folder / 'u16.png'))
    return files


def test_same_pixels_as_mxnet_imread(picture, tmp_path):
    for path in _files(picture, tmp_path):
        with open(path, 'rb') as f:
            assert decodes_like_mxnet(f.read()), path  # decoded by cv2, not handed back
        ours, ref = imread_rgb(path), mx.image.imread(path, 1).asnumpy()
        assert ours.dtype == np.uint8 and ours.shape == ref.shape, path
        assert np.array_equal(ours, ref), path


def test_cut_short_and_other_files_are_read_by_mxnet(picture, tmp_path):
    whole = _save(picture, tmp_path / 'whole.jpg', quality=90)
    with open(whole, 'rb') as f:
        data = f.read()
    cut = str(tmp_path / 'cut.jpg')
    with open(cut, 'wb') as f:
        f.write(data[:len(data) // 2])  # libjpeg-turbo 2.0 and 2.1 fill the rest differently
    bmp = _save(picture, tmp_path / 'picture.bmp')
    for path in (cut, bmp):
        with open(path, 'rb') as f:
            assert not decodes_like_mxnet(f.read())
        assert np.array_equal(imread_rgb(path), mx.image.imread(path, 1).asnumpy())
