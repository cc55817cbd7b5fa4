"""--gpus parsing, and the processor name recorded files carry."""
import platform

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


def test_processor_name_is_the_first_model_name_line(tmp_path):
    from gluontrain.core.devices import processor_name
    cpuinfo = tmp_path / 'cpuinfo'
    cpuinfo.write_text('processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) '
                       'CPU @ 2.80GHz\nflags\t\t: avx512f\n\nprocessor\t: 1\nmodel name\t: other\n')
    assert processor_name(str(cpuinfo)) == 'Intel(R) Xeon(R) CPU @ 2.80GHz'
    cpuinfo.write_text('processor\t: 0\n')  # no model name (some ARM kernels): platform's word
    assert processor_name(str(cpuinfo)) == (platform.processor() or 'unknown')
    assert processor_name(str(tmp_path / 'absent')) == (platform.processor() or 'unknown')
