"""--gpus parsing."""
import pytest

from gluontrain.core.devices import parse_gpu_ids


@pytest.mark.parametrize('text,ids', [('0', [0]), ('0,1,2,3', [0, 1, 2, 3]), ('', []),
                                      (' ', []), ('0-3', [0, 1, 2, 3]), ('1, 3', [1, 3]),
                                      ('0,', [0]), ('4-5,0', [4, 5, 0])])
def test_valid(text, ids):
    assert parse_gpu_ids(text) == ids


@pytest.mark.parametrize('text,match', [('a', "'a' is not a GPU id"), ('0;1', 'not a GPU id'),
                                        ('3-1', 'not a GPU id'), ('0,0', 'twice'),
                                        ('-1', 'not a GPU id')])
def test_invalid_names_the_value_and_the_fix(text, match):
    with pytest.raises(ValueError, match=match) as e:
        parse_gpu_ids(text)
    assert "--gpus ''" in str(e.value) or 'twice' in str(e.value)


def test_check_gpu_ids_names_missing_ids_and_the_fix():
    from gluontrain.core.devices import check_gpu_ids
    check_gpu_ids('0,1', [0, 1], 2, 'X')  # all visible: no error
    with pytest.raises(ValueError) as e:
        check_gpu_ids('0-3', [0, 1, 2, 3], 2, 'MXNet', ' (hint)')
    assert str(e.value) == ("--gpus '0-3' asks for GPU 2,3 but MXNet sees 2 GPU(s) (hint). "
                            "Pass --gpus '' to train on the CPU (or --cpus N for N CPU contexts).")
