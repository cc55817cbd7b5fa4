"""The padded image batch: seamseg's padding, maskrcnn-benchmark's ``to_image_list``."""
import pytest
import torch

from gluontrain.torch.twostage.images import ImageList, pad_images, to_image_list


def test_pad_images():
    padded, sizes = pad_images([torch.ones(3, 2, 5), torch.ones(3, 4, 3)])
    assert padded.shape == (2, 3, 4, 5) and sizes == [(2, 5), (4, 3)]
    assert padded[0, :, 2:].sum() == 0 and padded[1, :, :, 3:].sum() == 0
    with pytest.raises(ValueError):
        pad_images([])


def test_to_image_list_pads_to_size_divisibility():
    a, b = torch.ones(3, 5, 7), 2 * torch.ones(3, 6, 4)
    images = to_image_list([a, b], size_divisible=4)
    assert images.tensors.shape == (2, 3, 8, 8)
    assert [tuple(s) for s in images.image_sizes] == [(5, 7), (6, 4)]
    assert images.tensors[0, :, :5, :7].eq(1).all() and images.tensors[0, :, 5:].eq(0).all()
    assert images.tensors[1, :, :6, :4].eq(2).all() and images.tensors[1, :, :, 4:].eq(0).all()
    assert to_image_list([a, b]).tensors.shape == (2, 3, 6, 7)
    assert to_image_list(images) is images
    single = to_image_list(a, size_divisible=32)
    assert single.tensors.shape == (1, 3, 32, 32)
    assert isinstance(images.to(torch.float64), ImageList)
    with pytest.raises(TypeError):
        to_image_list('image')


def test_to_image_list_pads_a_list_to_divisibility():
    b = to_image_list([torch.ones(3, 40, 50), torch.ones(3, 70, 20)], 32)
    assert b.tensors.shape == (2, 3, 96, 64)
    assert b.image_sizes == [(40, 50), (70, 20)]
    assert b.tensors[0, :, 40:].abs().sum() == 0 and b.tensors[0, :, :40, :50].min() == 1
