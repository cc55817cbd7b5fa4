"""tests/xdist_schedule.py: modules ordered longest first and handed out whole, so that the two
workers of the suite end together and no module's fixtures are built twice."""
import json
import types

import pytest

import xdist_schedule

pytest.importorskip('xdist')

COLLECTION = ['tests/a.py::t1', 'tests/b.py::t1', 'tests/a.py::t2', 'tests/c.py::t1',
              'tests/b.py::t2[x]', 'tests/b.py::t2[y]', 'tests/d.py::t1']


def test_modules_longest_first_contiguous_in_collection_order():
    order = xdist_schedule.order_by_module_duration(
        COLLECTION, {'tests/a.py': 5.0, 'tests/b.py': 30.0, 'tests/c.py': 5.0})
    # b (30 s), then d (unknown: one test at UNKNOWN_TEST_S = 1 s) after a and c (5 s, by path)
    assert [COLLECTION[i] for i in order] == [
        'tests/b.py::t1', 'tests/b.py::t2[x]', 'tests/b.py::t2[y]',
        'tests/a.py::t1', 'tests/a.py::t2', 'tests/c.py::t1', 'tests/d.py::t1']
    assert sorted(order) == list(range(len(COLLECTION)))


def test_module_totals_and_write_read_round_trip(tmp_path):
    totals = xdist_schedule.module_totals({'tests/a.py::t1': 1.25, 'tests/a.py::t2[1]': 2.0,
                                           'tests/b.py::C::t': 0.04})
    assert totals == {'tests/a.py': 3.2, 'tests/b.py': 0.0}
    path = str(tmp_path / 'durations.json')
    xdist_schedule.write_durations(totals, path)
    assert xdist_schedule.read_durations(path) == totals
    assert json.loads(open(path).read()) == totals
    assert list(tmp_path.iterdir()) == [tmp_path / 'durations.json']  # no temp file left
    (tmp_path / 'bad.json').write_text('{not json')
    assert xdist_schedule.read_durations(str(tmp_path / 'bad.json')) == {}
    assert xdist_schedule.read_durations(str(tmp_path / 'missing.json')) == {}


class _Config:
    def getvalue(self, name):
        return {'tx': ['2*popen']}[name]

    def getoption(self, name):
        return {'maxschedchunk': None, 'dist': 'load'}[name]


class _Node:
    """A worker as the scheduler sees it: what it was sent, whether it was shut down."""

    def __init__(self, name):
        self.gateway = types.SimpleNamespace(id=name)
        self.sent, self.shutting_down = [], False

    def send_runtest_some(self, indexes):
        self.sent.extend(indexes)

    def shutdown(self):
        assert not self.shutting_down, 'shut down twice'
        self.shutting_down = True


def _simulate(collection, seconds):
    """Run ``collection`` (already ordered) on two simulated workers; each test takes
    ``seconds[nodeid]``. Returns the nodes and the time each finished."""
    sched = xdist_schedule.make_module_scheduling(_Config(), None)
    nodes = [_Node('gw0'), _Node('gw1')]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, collection)
    sched.schedule()
    clock, done = {n: 0.0 for n in nodes}, {n: 0 for n in nodes}
    while any(done[n] < len(n.sent) for n in nodes) or not sched.tests_finished:
        # the worker whose current test ends first reports it (a worker runs a test only
        # once it knows the next one or has been shut down, as xdist's do)
        ready = [n for n in nodes if done[n] < len(n.sent)
                 and (done[n] + 1 < len(n.sent) or n.shutting_down)]
        assert ready, 'a worker waits for a test that never comes'
        node = min(ready, key=lambda n: clock[n] + seconds[collection[n.sent[done[n]]]])
        index = node.sent[done[node]]
        clock[node] += seconds[collection[index]]
        done[node] += 1
        sched.mark_test_complete(node, index)
    assert all(n.shutting_down for n in nodes)
    return nodes, clock


def test_two_workers_end_together_and_no_module_is_split():
    # module -> per-test seconds: one long module, a notebook-like one, many short ones
    modules = {'tests/long.py': [300.0], 'tests/nb.py': [100.0, 90.0, 1.0],
               'tests/mid.py': [60.0] * 3}
    modules.update({'tests/s%02d.py' % i: [2.0, 1.5, 0.5] for i in range(40)})
    collection, seconds = [], {}
    for module, times in modules.items():
        for j, s in enumerate(times):
            collection.append('%s::t%d' % (module, j))
            seconds[collection[-1]] = s
    order = xdist_schedule.order_by_module_duration(
        collection, xdist_schedule.module_totals(seconds))
    ordered = [collection[i] for i in order]
    nodes, clock = _simulate(ordered, seconds)
    ran = [ordered[i] for n in nodes for i in n.sent]
    assert sorted(ran) == sorted(collection)  # every test once
    for node in nodes:  # whole modules per worker
        mods = {xdist_schedule.module_of(ordered[i]) for i in node.sent}
        assert all(xdist_schedule.module_of(t) not in mods
                   for other in nodes if other is not node
                   for t in (ordered[i] for i in other.sent))
    total = sum(seconds.values())
    ideal = total / 2
    # longest-first: the two ends within the shortest module's time of each other here
    assert abs(clock[nodes[0]] - clock[nodes[1]]) <= 4.0
    assert max(clock.values()) <= ideal + 2.0
    # the look-aheads are the short modules: the long ones went out as the front of the queue
    assert {xdist_schedule.module_of(ordered[n.sent[0]]) for n in nodes} == {'tests/long.py',
                                                                           'tests/nb.py'}
