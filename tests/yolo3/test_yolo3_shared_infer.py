"""gluontrain.yolo3.infer: one parser per script for both backends, the --backend route, the
printed table."""
import argparse
import os

import pytest

from gluontrain.yolo3.infer import (backend_of, demo_parser, eval_lines, eval_parser,
                                    is_zoo_true, model_name, zoo_table)


def test_backend_is_read_as_argparse_reads_it():
    assert backend_of([]) == 'mxnet'
    assert backend_of(['--params', 'x', '--backend', 'torch']) == 'torch'
    assert backend_of(['--backend=torch', '--backend', 'mxnet']) == 'mxnet'
    argv = ['--backend', 'torch', '--backend=mxnet', '--params', 'p']
    assert eval_parser().parse_args(argv).backend == backend_of(argv) == 'mxnet'
    assert demo_parser().parse_args(['--backend', 'torch', 'a.jpg']).backend == 'torch'
    with pytest.raises(SystemExit):
        eval_parser().parse_args(['--backend', 'tf'])


def test_names_and_the_zoo_table():
    assert model_name('darknet53', 'VOC') == 'yolo3_darknet53_voc'
    assert model_name('mobilenet0.25', 'synthetic') == 'yolo3_mobilenet0.25_custom'
    assert [is_zoo_true(v) for v in ('True', ' 1 ', 'x.params', '')] == [True, True, False,
                                                                          False]
    table = zoo_table('darknet53', 'voc', 416, ['a', 'mAP'], [0.5, 0.8])
    assert table.splitlines()[2].split() == ['yolo3_darknet53_voc', '416', '80.0', '81.5']
    assert table.splitlines()[3].split() == ['320', '79.3']
    args = argparse.Namespace(dataset='voc', network='darknet53', data_shape=416)
    lines = eval_lines(args, ['a', 'mAP'], [0.5, 0.8])
    assert lines[:2] == ['a=0.5', 'mAP=0.8'] and lines[-1] == 'score: 80.0000'


def test_ctrl_c_while_the_backend_imports_is_one_line(monkeypatch, capsys):
    import builtins
    from gluontrain.tool_route import INTERRUPTED, script_main
    real_import = builtins.__import__

    def ctrl_c_on_the_backend(name, *args, **kwargs):
        if name.endswith('yolo3') and args and args[2] and 'infer' in args[2]:
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, '__import__', ctrl_c_on_the_backend)
    assert script_main('eval', ['--backend', 'torch']) == 130
    assert capsys.readouterr().err.strip() == INTERRUPTED['eval']


def test_pretrained_true_fetches_a_missing_zoo_file_for_both_backends(tmp_path, monkeypatch):
    # both backends' eval/demo take --pretrained True through this one function
    from argparse import Namespace
    from gluontrain.core import model_store
    from gluontrain.yolo3.infer import zoo_params
    monkeypatch.setenv('MXNET_HOME', str(tmp_path))
    fetched = []

    def fetch(name):
        fetched.append(name)
        return model_store.params_path(name)

    monkeypatch.setattr(model_store, 'fetch', fetch)
    args = Namespace(params='True', network='darknet53', dataset='coco')
    assert zoo_params(args) == str(tmp_path / 'models' / 'yolo3_darknet53_coco-09767802.params')
    assert fetched == ['yolo3_darknet53_coco']
    os.makedirs(str(tmp_path / 'models'))
    open(str(tmp_path / 'models' / 'yolo3_darknet53_coco-09767802.params'), 'wb').close()
    assert zoo_params(args) and fetched == ['yolo3_darknet53_coco']  # present: not fetched
    assert zoo_params(Namespace(params=' my.params ', network='x', dataset='voc')) == 'my.params'
