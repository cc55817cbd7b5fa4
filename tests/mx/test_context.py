"""Contexts from --gpus / --cpus."""
import mxnet as mx
import pytest

from gluontrain.mx.context import get_contexts, is_cpu


def test_cpu_and_several_cpu_contexts():
    assert get_contexts('') == [mx.cpu()]
    assert get_contexts('0', cpus=2) == [mx.cpu(0), mx.cpu(1)]
    assert is_cpu(get_contexts('', cpus=3))


@pytest.mark.skipif(mx.context.num_gpus() > 0, reason='asserts the CPU-build message')
def test_gpu_on_cpu_build_names_the_fix():
    with pytest.raises(ValueError, match=r"asks for GPU 0 but MXNet sees 0 GPU\(s\).*--gpus ''"):
        get_contexts('0')


def test_malformed_gpus():
    with pytest.raises(ValueError, match="'x' is not a GPU id"):
        get_contexts('0,x')
