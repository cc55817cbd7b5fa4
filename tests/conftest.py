"""Session-wide fixtures (tiny generated datasets in the real on-disk formats) and the suite's
budget report.

The datasets are shared by every test of a session (one copy per xdist worker), so tests must
not modify them: copy one (``shutil.copytree``) before corrupting it.

At the end of a run the terminal summary reports (docs/testing.md, "Budget"):
the live-reference comparisons that did not run and why (their recorded twins did), the 15
slowest tests, and the total test time of the ``slow`` and the other tests beside the wall time.
"""
import collections
import gc
import os
import subprocess
import time

import pytest

import env_split
import xdist_schedule
from gluontrain.data import synthetic


@pytest.fixture(scope='session')
def voc_root(tmp_path_factory):
    """A tiny VOCdevkit: VOC2007 (16 trainval + 8 test) and VOC2012 (16 trainval), 112-144 px,
    the five default classes. Yields the VOCdevkit path (``VOCDetection``'s ``root``)."""
    root = tmp_path_factory.mktemp('voc')
    return synthetic.write_voc(str(root), num_train=16, num_val=8, seed=0, years=(2007, 2012),
                               classes=synthetic.DEFAULT_VOC_CLASSES, image_size=(112, 144),
                               max_objects=6)


@pytest.fixture(scope='session')
def coco_root(tmp_path_factory):
    """A tiny COCO 2017 layout: 12 train and 6 val images (one val image without annotations),
    112-144 px, the ten default categories. Yields the root (``COCODetection``'s ``root``)."""
    root = tmp_path_factory.mktemp('coco')
    return synthetic.write_coco(str(root), num_train=12, num_val=6, seed=0,
                                image_size=(112, 144))


@pytest.fixture(scope='session')
def vg_root(tmp_path_factory):
    """A tiny Visual Genome scene-graph dataset: 12 train and 6 test images, 144-192 px."""
    root = tmp_path_factory.mktemp('vg')
    return synthetic.write_vg(str(root), num_train=12, num_val=6, seed=0, image_size=(144, 192))


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(name, options)``: a small tmpfs at ``tmp_path/name`` (a full or read-only disk;
    root only, skipped otherwise), unmounted after."""
    mounted = []

    def mount(name, options):
        path = tmp_path / name
        path.mkdir()
        if os.geteuid() != 0:
            pytest.skip('mounting a small tmpfs needs root')
        res = subprocess.run(['mount', '-t', 'tmpfs', '-o', options, 'tmpfs', str(path)],
                             capture_output=True, text=True, check=False)
        if res.returncode:
            pytest.skip('cannot mount a tmpfs here: ' + res.stderr.strip())
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(['umount', '-l', str(path)], check=False)  # lazy: files may be open


# ------------------------------------------------------------------------------ scheduling
def pytest_addoption(parser):
    """The split of README command (b)'s two environments (tests/env_split.py)."""
    group = parser.getgroup('gluontrain')
    group.addoption('--tested-elsewhere', metavar='FILE', default=None,
                    help='deselect the tests listed in FILE (tox py311: those torch-py313 runs)')
    group.addoption('--must-pass', metavar='FILE', default=None,
                    help='fail the session unless every test listed in FILE passed')


def pytest_collection_modifyitems(config, items):
    """Leave out the tests another environment runs (``--tested-elsewhere``); under xdist, the
    longest modules first (tests/xdist_schedule.py); one process keeps pytest's order."""
    elsewhere = config.getoption('tested_elsewhere')
    if elsewhere:
        items[:], deselected = env_split.split_items(items, env_split.read_list(elsewhere))
        config.hook.pytest_deselected(items=deselected)
    if hasattr(config, 'workerinput') and config.getoption('dist') == 'load':
        order = xdist_schedule.order_by_module_duration([i.nodeid for i in items],
                                                  xdist_schedule.read_durations())
        items[:] = [items[i] for i in order]


def pytest_collection_finish(session):  # pylint: disable=unused-argument
    """Freeze what importing the frameworks and collecting the tests made (``gc.freeze``): a
    full collection then skips those long-lived objects (about 280,000 after importing torch,
    MXNet and GluonCV alone). MXNet's ``DataLoader`` runs ``gc.collect()`` at every
    construction and the picture hooks after a redraw: 0.2-0.5 s each in a test process
    (docs/testing.md, "Budget"). The tests' own objects are collected as before."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist load`` hands out whole modules, longest first (tests/xdist_schedule.py)."""
    if config.getoption('dist') == 'load':
        return xdist_schedule.make_module_scheduling(config, log)
    return None


# ------------------------------------------------------------------------------ budget report
#: The budget of the whole suite on 2 cores (README command (b), set-up included) and of the
#: cheap tier ``-m "not slow"`` (docs/testing.md).
SUITE_BUDGET_S, CHEAP_TIER_BUDGET_S = 15 * 60, 5 * 60
#: A test over this many seconds (set-up included) is ``slow`` (docs/testing.md).
SLOW_TEST_S = 10
_RUN = {'start': None, 'durations': collections.defaultdict(float), 'slow': set(),
        'live_skips': collections.Counter(), 'live_ran': 0, 'passed': set(), 'not_passed': []}


def pytest_sessionstart(session):  # pylint: disable=unused-argument
    """Start the wall clock of the run."""
    _RUN['start'] = time.time()


def pytest_runtest_logreport(report):
    """Add up each test's set-up, call and teardown time, and note the live-reference skips
    (on the xdist controller, reports arrive from every worker)."""
    _RUN['durations'][report.nodeid] += report.duration
    if 'slow' in report.keywords:
        _RUN['slow'].add(report.nodeid)
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
        if 'GLUONTRAIN_REFERENCES' in reason:
            twin = report.nodeid.endswith(('[live]', '-live]'))
            _RUN['live_skips'][(twin, reason.replace('Skipped: ', '', 1))] += 1
    elif report.when == 'call' and report.passed:
        _RUN['passed'].add(report.nodeid)
        _RUN['live_ran'] += 'live_reference' in report.keywords


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """``--must-pass FILE``: a listed test that did not pass fails the session (the summary
    names it); ``GLUONTRAIN_WRITE_NEWEST_PYTHON=1`` rewrites the list from this run's passes."""
    listed = session.config.getoption('must_pass')
    if not listed:
        return
    if os.environ.get('GLUONTRAIN_WRITE_NEWEST_PYTHON') == '1':
        import platform  # pylint: disable=import-outside-toplevel
        import numpy  # pylint: disable=import-outside-toplevel
        env_split.write_list(listed, _RUN['passed'], 'Python {}, numpy {}, {}'.format(
            platform.python_version(), numpy.__version__, time.strftime('%Y-%m-%d')))
    _RUN['not_passed'] = env_split.not_passed(env_split.read_list(listed), _RUN['passed'])
    if _RUN['not_passed']:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    """The live-reference and budget sections of the terminal summary."""
    tr = terminalreporter
    durations = _RUN['durations']
    if not durations:
        return
    skips = _RUN['live_skips']
    tr.section('live-reference comparisons')
    if skips:
        twins = sum(n for (twin, _), n in skips.items() if twin)
        tr.write_line('%d live-reference test(s) did not run: %d [live] twins of recorded '
                      'comparisons that did run (tests/fixtures/recorded/), %d live only:'
                      % (sum(skips.values()), twins, sum(skips.values()) - twins))
        for (twin, reason), count in sorted(skips.items(), key=lambda kv: (not kv[0][0],
                                                                          -kv[1])):
            tr.write_line('  %3d  %s  %s' % (count, 'twin' if twin else 'only', reason))
    else:
        tr.write_line('none skipped: %d ran against the references\' own code'
                      % _RUN['live_ran'])
    _report_env_split(tr)
    tr.section('budget')
    wall = time.time() - _RUN['start']
    total = sum(durations.values())
    slow = sum(d for k, d in durations.items() if k in _RUN['slow'])
    tr.write_line('%d tests, %.0f s of test time (slow: %d tests, %.0f s; others %.0f s), '
                  '%.0f s wall' % (len(durations), total, len(_RUN['slow']), slow,
                                   total - slow, wall))
    tr.write_line('budgets on 2 cores: whole suite with set-up %d s, -m "not slow" %d s '
                  '(docs/testing.md)' % (SUITE_BUDGET_S, CHEAP_TIER_BUDGET_S))
    # GLUONTRAIN_SLOWEST=N lists N instead of 15 (finding what to trim)
    shown = int(os.environ.get('GLUONTRAIN_SLOWEST') or 15)
    tr.write_line('%d slowest (set-up + call + teardown):' % shown)
    for nodeid, dur in sorted(durations.items(), key=lambda kv: -kv[1])[:shown]:
        tr.write_line('  %7.1f s  %s%s' % (dur, nodeid,
                                          '  [slow]' if nodeid in _RUN['slow'] else ''))
    if os.environ.get('GLUONTRAIN_WRITE_DURATIONS') == '1':
        # merged, so that a partial run updates the modules it ran and keeps the others
        recorded = xdist_schedule.read_durations()
        recorded.update(xdist_schedule.module_totals(durations))
        xdist_schedule.write_durations(recorded)
        tr.write_line('wrote the seconds of %d modules to %s' % (
            len(recorded), os.path.relpath(xdist_schedule.DURATIONS_FILE)))
    heavy = sorted((d, k) for k, d in durations.items()
                   if d > SLOW_TEST_S and k not in _RUN['slow'])
    if heavy:
        tr.write_line('not marked slow but over %d s (mark them, or make them smaller):'
                      % SLOW_TEST_S)
        for dur, nodeid in reversed(heavy):
            tr.write_line('  %7.1f s  %s' % (dur, nodeid))


def _report_env_split(tr):
    """Say which tests this run left to the other environment, or which listed ones failed it."""
    elsewhere, must_pass = (tr.config.getoption(o) for o in ('tested_elsewhere', 'must_pass'))
    if elsewhere:
        tr.section('left to torch-py313')
        tr.write_line('the %d tests listed in %s are left to tox\'s torch-py313 env, which must '
                      'pass them (tests/env_split.py); `tox -e py311 -- tests` runs them here too'
                      % (len(env_split.read_list(elsewhere)), os.path.relpath(elsewhere)))
    if must_pass and _RUN['not_passed']:
        tr.section('left here by py311, not passed', red=True)
        tr.write_line('%d tests listed in %s (py311 leaves them to this env) did not pass here: '
                      'make them pass, or rewrite the list (GLUONTRAIN_WRITE_NEWEST_PYTHON=1, '
                      'tests/env_split.py)' % (len(_RUN['not_passed']), os.path.relpath(must_pass)))
        for nodeid in _RUN['not_passed'][:20]:
            tr.write_line('  ' + nodeid)
        if len(_RUN['not_passed']) > 20:
            tr.write_line('  and %d more' % (len(_RUN['not_passed']) - 20))
