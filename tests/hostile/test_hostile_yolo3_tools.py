"""Hostile inputs to the YOLOv3 tools (scripts/eval_yolov3.py, demo_yolov3.py on both
backends, export_yolov3.py on PyTorch): each ends in one ``error:`` line naming the argument
or file (or one ``interrupted`` line, status 130), a non-zero exit, no traceback, no hang and
nothing written (issue 40). In this process through the scripts' own entry points."""
import os
import struct
import threading

import pytest

from hostile_support import (EXIT_INTERRUPTED, check_refused, empty_file, garbage,
                             read_only_dir, voc_image)

BACKENDS = ('mxnet', 'torch')


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    """A tiny VOCdevkit, an untrained mobilenet0.25 VOC YOLOv3's ``.params`` (both backends
    read it) and its exported graph (``model-symbol.json``, ``model-0000.params``)."""
    import mxnet as mx
    from gluontrain.data import synthetic
    from gluontrain.mx import gluoncv
    root = tmp_path_factory.mktemp('tools')
    voc = synthetic.write_voc(str(root / 'voc'), num_train=2, num_val=2, seed=0,
                              years=(2007, 2012), classes=synthetic.DEFAULT_VOC_CLASSES,
                              image_size=(64, 80), max_objects=2)
    net = gluoncv.model_zoo.get_model('yolo3_mobilenet0.25_voc', pretrained_base=False)
    net.initialize()
    net.hybridize()
    net(mx.nd.zeros((1, 3, 64, 64)))
    params = str(root / 'yolo3.params')
    net.save_parameters(params)
    net.export(str(root / 'model'))
    return {'voc': voc, 'params': params, 'symbol': str(root / 'model-symbol.json'),
            'exported': str(root / 'model-0000.params'), 'image': voc_image(voc, 0, 'test')}


def _tool(kind, argv, capsys):
    """``scripts/{kind}_yolov3.py argv`` in this process: (status, stderr)."""
    # pylint: disable=import-outside-toplevel
    from gluontrain.tool_route import INTERRUPTED, script_main
    try:
        if kind == 'export':
            from gluontrain.torch.yolo3.export import export_main
            from gluontrain.yolo3.infer import cli
            code = cli(export_main, argv, INTERRUPTED['export'])
        else:
            code = script_main(kind, argv)
    except SystemExit as e:  # argparse: "prog: error: argument ..." and status 2
        code = e.code
    return code, capsys.readouterr().err


def _hostile_params(path):
    """4 KB: MXNet's list magic, then random bytes (MXNet's own loader allocated 21 GB for
    such a file before failing)."""
    with open(path, 'wb') as f:
        f.write(struct.pack('<QQ', 0x112, 0) + os.urandom(4096 - 16))
    return path


def _fifo(path):
    os.mkfifo(path)
    return path


class Tool:
    """One case's workspace: ``argv(kind)`` of a good command, ``extra`` spoils it."""

    def __init__(self, tmp_path, files, backend):
        self.tmp, self.f, self.backend = tmp_path, files, backend
        self.out = str(tmp_path / 'out')
        self.extra, self.images, self.weights = [], [files['image']], None

    def arg(self, flag, value):
        self.extra += [flag, str(value)]
        return flag

    def path(self, name):
        return str(self.tmp / name)

    def argv(self, kind):
        weights = self.weights or ['--params', self.f['params']]
        common = ['--network', 'mobilenet0.25', '--dataset', 'voc', '--data-shape', '64']
        if kind == 'export':
            return common + weights + ['--out', os.path.join(self.out, 'm.onnx')] + self.extra
        common = ['--backend', self.backend] + common + weights
        if kind == 'eval':
            return common + ['--dataset-root', self.f['voc']] + self.extra
        return common + ['--out', self.out] + self.extra + self.images


# case -> (tools, spoil): spoil(t) returns the names the error line must carry
CASES = {
    'data-shape 0': (('demo', 'eval', 'export'), lambda t: [t.arg('--data-shape', 0)]),
    'data-shape negative': (('demo', 'eval'), lambda t: [t.arg('--data-shape', -32)]),
    'data-shape 63': (('demo', 'export'), lambda t: [t.arg('--data-shape', 63)]),
    'batch-size 0': (('eval', 'export'), lambda t: [t.arg('--batch-size', 0)]),
    'num-workers negative': (('eval',), lambda t: [t.arg('-j', -1)]),
    'thresh nan': (('demo',), lambda t: [t.arg('--thresh', 'nan')]),
    'thresh above 1': (('demo',), lambda t: [t.arg('--thresh', 2)]),
    'classes twice': (('demo', 'eval', 'export'), lambda t: [
        t.arg('--dataset', 'custom'), t.arg('--classes', 'a,b,a')] and ['--classes', 'a']),
    'image a folder': (('demo',), lambda t: [_set_image(t, str(t.tmp))]),
    'image empty': (('demo',), lambda t: [_set_image(t, empty_file(t.path('e.jpg')))]),
    'image random bytes': (('demo',), lambda t: [_set_image(t, _random(t.path('r.jpg')))]),
    'image text': (('demo',), lambda t: [_set_image(t, garbage(t.path('t.jpg')))]),
    'image missing': (('demo',), lambda t: [_set_image(t, t.path('gone.jpg'))]),
    'image a named pipe': (('demo',), lambda t: [_set_image(t, _fifo(t.path('p.jpg')))]),
    'good image then a bad one': (('demo',), lambda t: [
        t.images.append(garbage(t.path('bad.jpg'))) or t.images[-1]]),
    'out an existing file': (('demo',), lambda t: [
        _set_out(t, garbage(t.path('o.txt')))]),
    'out a folder (export writes a file)': (('export',), lambda t: [
        _set_export_out(t, str(t.tmp))]),
    'out under a file': (('demo', 'export'), lambda t: [
        _set_out(t, os.path.join(garbage(t.path('o.txt')), 'sub'))]),
    'params missing': (('demo', 'eval', 'export'), lambda t: [
        _weights(t, '--params', t.path('gone.params'))]),
    'params a folder': (('demo', 'eval', 'export'), lambda t: [
        _weights(t, '--params', str(t.tmp))]),
    'params empty': (('demo', 'eval', 'export'), lambda t: [
        _weights(t, '--params', empty_file(t.path('e.params')))]),
    'params a named pipe': (('demo', 'eval'), lambda t: [
        _weights(t, '--params', _fifo(t.path('p.params')))]),
    'params 4 KB of random bytes after the list magic': (('demo', 'eval', 'export'), lambda t: [
        _weights(t, '--params', _hostile_params(t.path('h.params')))]),
    'dataset-root missing': (('eval',), lambda t: [t.arg('--dataset-root', t.path('nowhere'))]),
}

# the exported graph (MXNet only: the torch backend refuses it in one line as well)
GRAPH_CASES = {
    'symbol missing': lambda t: _graph(t, t.path('gone.json'), t.f['exported'])[:1],
    'symbol not JSON': lambda t: _graph(t, garbage(t.path('s.json')), t.f['exported'])[:1],
    'symbol with the wrong params': lambda t: _graph(t, t.f['symbol'], t.f['params']),
    'exported params hostile': lambda t: _graph(t, t.f['symbol'],
                                                _hostile_params(t.path('h.params')))[1:],
}


def _set_image(t, path):
    t.images = [path]
    return path


def _set_out(t, path):
    t.out = path
    return path


def _set_export_out(t, folder):
    t.extra += ['--out', folder]  # the last --out wins
    return folder


def _weights(t, flag, path):
    t.weights = [flag, path]
    return path


def _random(path):
    with open(path, 'wb') as f:
        f.write(os.urandom(4096))
    return path


def _graph(t, symbol, params):
    t.weights = ['--symbol', symbol, '--exported-params', params]
    return [symbol, params]


def _matrix():
    for name, (tools, _) in sorted(CASES.items()):
        for kind in tools:
            for backend in (BACKENDS if kind != 'export' else ('torch',)):
                yield pytest.param(name, kind, backend, id='{}-{}-{}'.format(kind, backend, name))


@pytest.mark.parametrize('name,kind,backend', list(_matrix()))
def test_tool_refuses_in_one_line(name, kind, backend, tmp_path, files, capsys):
    if kind == 'export':
        pytest.importorskip('torch')
    tool = Tool(tmp_path, files, backend)
    names = CASES[name][1](tool)
    # a named pipe must be refused, never opened: a reader would wait here forever
    done = threading.Event()
    timer = threading.Timer(60, lambda: done.is_set() or os._exit(3))
    timer.start()
    try:
        code, err = _tool(kind, tool.argv(kind), capsys)
    finally:
        done.set()
        timer.cancel()
    check_refused(code, err, names)
    # nothing written: no picture, no detections.json, no ONNX file
    if os.path.isdir(tool.out):
        assert not os.listdir(tool.out), os.listdir(tool.out)


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('name', sorted(GRAPH_CASES))
def test_exported_graph_refused_in_one_line(name, backend, tmp_path, files, capsys):
    tool = Tool(tmp_path, files, backend)
    names = GRAPH_CASES[name](tool)
    code, err = _tool('eval', tool.argv('eval'), capsys)
    check_refused(code, err, names if backend == 'mxnet' else ['--symbol'])


def test_read_only_out_folder_is_refused_before_detecting(tmp_path, files, capsys):
    unmount = read_only_dir(tmp_path / 'ro')
    try:
        tool = Tool(tmp_path, files, 'mxnet')
        tool.out = str(tmp_path / 'ro' / 'demo')
        code, err = _tool('demo', tool.argv('demo'), capsys)
        check_refused(code, err, ['--out', 'not writable'])
    finally:
        unmount()


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('kind', ('eval', 'demo'))
def test_ctrl_c_ends_in_one_interrupted_line(kind, backend, tmp_path, files, capsys,
                                             monkeypatch):
    # pylint: disable=import-outside-toplevel
    import importlib
    module = importlib.import_module('gluontrain.{}.yolo3.infer'.format(
        'mx' if backend == 'mxnet' else 'torch'))

    def ctrl_c(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, 'evaluate' if kind == 'eval' else 'detect_file', ctrl_c)
    tool = Tool(tmp_path, files, backend)
    code, err = _tool(kind, tool.argv(kind), capsys)
    assert code == EXIT_INTERRUPTED
    check_refused(code, err, [], interrupted=True)
    assert not os.path.exists(os.path.join(tool.out, 'detections.json'))


def test_ctrl_c_that_mxnet_turned_into_its_own_error_is_still_interrupted(tmp_path, files,
                                                                         capsys, monkeypatch):
    from gluontrain.mx.yolo3 import infer  # pylint: disable=import-outside-toplevel

    def ctrl_c_inside_mxnet(*_args, **_kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise TypeError('an NDArray assignment caught it') from None

    monkeypatch.setattr(infer, 'evaluate', ctrl_c_inside_mxnet)
    code, err = _tool('eval', Tool(tmp_path, files, 'mxnet').argv('eval'), capsys)
    check_refused(code, err, [], interrupted=True)


def test_truncated_image_is_warned_in_one_line_and_detected(tmp_path, files, capsys):
    from hostile_support import truncate  # pylint: disable=import-outside-toplevel
    tool = Tool(tmp_path, files, 'torch')
    image = str(tmp_path / 'cut.jpg')
    with open(files['image'], 'rb') as src, open(image, 'wb') as dst:
        dst.write(src.read())
    truncate(image, 0.4)
    tool.images = [image]
    with pytest.warns(UserWarning, match='cut.jpg is cut short'):
        code, _ = _tool('demo', tool.argv('demo'), capsys)
    assert code == 0
    assert os.path.isfile(os.path.join(tool.out, 'detections.json'))


@pytest.mark.slow  # two subprocesses
@pytest.mark.parametrize('backend', BACKENDS)
def test_4kb_params_under_a_2gb_address_space_limit(backend, tmp_path, files):
    # the file made MXNet's own loader take 21 GB for 66 s; a smaller machine killed the
    # process without a word: under `ulimit -v` 2 GB it must still be one line, at once
    import resource
    import subprocess
    import sys
    from hostile_support import ENV, SCRIPTS

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    path = _hostile_params(str(tmp_path / 'h.params'))
    res = subprocess.run(
        [sys.executable, os.path.join(SCRIPTS, 'eval_yolov3.py'), '--backend', backend,
         '--network', 'mobilenet0.25', '--dataset', 'voc', '--dataset-root', files['voc'],
         '--data-shape', '64', '--params', path], capture_output=True, text=True, env=ENV,
        preexec_fn=limit, timeout=120, check=False)
    check_refused(res.returncode, res.stderr, ['--params', path, 'corrupt'])
