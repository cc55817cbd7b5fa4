"""GluonCV's model store fetched without MXNet (issue 41, item 3), against a local HTTP
server on 127.0.0.1 that the test starts: a good file, a corrupted one, a connection cut
mid-file (resumed on the next call), a 404, and nothing listening."""
import hashlib
import http.server
import io
import os
import threading
import zipfile

import pytest

from gluontrain.core import model_store


class _Store(http.server.BaseHTTPRequestHandler):
    """Serves ``files`` (path -> bytes) with Range support; ``cut`` paths send half of the
    body once, then close."""
    files, cut, requests = {}, set(), []

    def do_GET(self):  # pylint: disable=invalid-name
        self.requests.append((self.path, self.headers.get('Range')))
        data = self.files.get(self.path)
        if data is None:
            self.send_error(404, 'Not Found')
            return
        start = 0
        if self.headers.get('Range'):
            start = int(self.headers['Range'].split('=')[1].split('-')[0])
            self.send_response(206)
            self.send_header('Content-Range', 'bytes {}-{}/{}'.format(start, len(data) - 1,
                                                                     len(data)))
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        if self.path in self.cut:
            self.cut.discard(self.path)
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *_args):  # quiet
        pass


@pytest.fixture
def server():
    _Store.files, _Store.cut, _Store.requests = {}, set(), []
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Store)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield 'http://127.0.0.1:{}/'.format(httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()


def _publish(name, payload, corrupt=False):
    """Zip ``payload`` as the store does; returns its SHA-1 (of the uncorrupted payload)."""
    sha1 = hashlib.sha1(payload).hexdigest()
    member = '{}-{}.params'.format(name, sha1[:8])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, 'w') as z:
        z.writestr(member, payload[::-1] if corrupt else payload)
    _Store.files['/gluon/models/{}-{}.zip'.format(name, sha1[:8])] = buffer.getvalue()
    return sha1


def test_the_layout_is_gluoncv_s(monkeypatch, tmp_path):
    monkeypatch.setenv('MXNET_HOME', str(tmp_path))
    monkeypatch.delenv('MXNET_GLUON_REPO', raising=False)
    assert model_store.params_path('darknet53') == str(
        tmp_path / 'models' / 'darknet53-2189ea49.params')
    assert model_store.url_of('yolo3_darknet53_coco') == (
        'https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/gluon/models/'
        'yolo3_darknet53_coco-09767802.zip')
    monkeypatch.setenv('MXNET_GLUON_REPO', 'http://mirror.example/x')
    assert model_store.url_of('mobilenet0.25').startswith('http://mirror.example/x/gluon/')


def test_gluoncv_s_own_table_where_it_is_installed():
    store = pytest.importorskip('gluontrain.mx') and pytest.importorskip(
        'gluoncv.model_zoo.model_store')
    for name, sha1 in model_store.SHA1.items():
        assert store._model_sha1[name] == sha1
        assert model_store.file_name(name) == '{}-{}'.format(name, store.short_hash(name))


def test_fetch_downloads_checks_and_then_reuses(server, tmp_path):
    payload = os.urandom(300_000)
    sha1 = _publish('net', payload)
    path = model_store.fetch('net', root=str(tmp_path), repo=server, sha1=sha1, progress=False)
    assert path == str(tmp_path / 'net-{}.params'.format(sha1[:8]))
    with open(path, 'rb') as f:
        assert f.read() == payload
    assert sorted(os.listdir(str(tmp_path))) == [os.path.basename(path),
                                                 os.path.basename(path) + '.lock']
    asked = len(_Store.requests)
    assert model_store.fetch('net', root=str(tmp_path), repo=server, sha1=sha1,
                             progress=False) == path
    assert len(_Store.requests) == asked  # the good file is not fetched again


def test_a_corrupted_file_is_not_kept(server, tmp_path):
    sha1 = _publish('net', os.urandom(10_000), corrupt=True)
    with pytest.raises(ValueError) as e:
        model_store.fetch('net', root=str(tmp_path), repo=server, sha1=sha1, progress=False)
    assert 'not the store\'s {}'.format(sha1) in str(e.value) and server in str(e.value)
    assert not [n for n in os.listdir(str(tmp_path)) if not n.endswith('.lock')]


def test_a_cut_download_resumes_where_it_stopped(server, tmp_path):
    payload = os.urandom(2_000_000)
    sha1 = _publish('net', payload)
    _Store.cut = set(_Store.files)
    with pytest.raises(ValueError, match='run again to resume'):
        model_store.fetch('net', root=str(tmp_path), repo=server, sha1=sha1, progress=False)
    part = str(tmp_path / 'net-{}.zip.part'.format(sha1[:8]))
    kept = os.path.getsize(part)
    assert 0 < kept < len(next(iter(_Store.files.values())))
    path = model_store.fetch('net', root=str(tmp_path), repo=server, sha1=sha1, progress=False)
    with open(path, 'rb') as f:
        assert f.read() == payload
    assert _Store.requests[-1][1] == 'bytes={}-'.format(kept)  # asked for the rest only
    assert not os.path.exists(part)


def test_404_and_nothing_listening_are_one_line_with_the_fix(server, tmp_path):
    with pytest.raises(ValueError) as e:
        model_store.fetch('darknet53', root=str(tmp_path), repo=server, progress=False)
    line = str(e.value)
    assert '\n' not in line and 'HTTP 404' in line and server + 'gluon/models/darknet53-2189ea49.zip' \
        in line and model_store.SHA1['darknet53'] in line and str(tmp_path) in line
    with pytest.raises(ValueError, match='cannot download http://127.0.0.1:9/') as e:
        model_store.fetch('darknet53', root=str(tmp_path), repo='http://127.0.0.1:9/',
                          progress=False, timeout=5)
    assert model_store.params_path('darknet53', str(tmp_path)) in str(e.value)


def test_an_unknown_name_is_refused():
    with pytest.raises(ValueError, match='no model of GluonCV'):
        model_store.fetch('resnet9000')
