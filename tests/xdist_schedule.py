"""Longest modules first: how the suite's test modules are ordered and handed to xdist workers.

With ``--dist load`` xdist hands each worker a quarter of the collection up front, in collection
order, so where the long modules (training to a measured mAP, notebook executions) happen to sit
decides when the run ends: one worker can still be busy minutes after the other ran out. Here
the collection is ordered by the measured time of each module (``tests/durations.json``, the
longest first, then by path) and a worker is handed one whole module whenever it is about to run
out of tests: longest-processing-time-first over modules, a greedy schedule that ends within one
module's time of the ideal. A module is never split between workers, so its module-scoped
fixtures (a trained run, a tiny dataset) are built once.

``tests/durations.json`` maps each module to its seconds of test time; rewrite it after a run
with ``GLUONTRAIN_WRITE_DURATIONS=1`` (docs/testing.md, "Budget"). A module it does not know is
estimated at ``UNKNOWN_TEST_S`` per test.
"""
import json
import os

DURATIONS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'durations.json')
#: seconds assumed per test of a module that is not in ``durations.json`` yet
UNKNOWN_TEST_S = 1.0


def module_of(nodeid):
    """The module of a pytest node id: ``tests/a/test_b.py::test_c[1]`` -> ``tests/a/test_b.py``."""
    return nodeid.split('::', 1)[0]


def read_durations(path=DURATIONS_FILE):
    """The recorded seconds per module, or an empty dict if the file is missing or unreadable."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}


def order_by_module_duration(nodeids, durations):
    """Indexes into ``nodeids``: modules by descending recorded (or estimated) seconds, then by
    path; the tests of a module contiguous and in their collection order.

    Parameters
    ----------
    nodeids : list of str
        The collection, in pytest's order.
    durations : dict
        Module path -> seconds, as ``read_durations`` returns.

    Returns
    -------
    list of int
        A permutation of ``range(len(nodeids))``.
    """
    members = {}
    for i, nodeid in enumerate(nodeids):
        members.setdefault(module_of(nodeid), []).append(i)

    def cost(module):
        return durations.get(module, UNKNOWN_TEST_S * len(members[module]))

    return [i for module in sorted(members, key=lambda m: (-cost(m), m)) for i in members[module]]


def module_totals(durations_by_nodeid):
    """Module path -> summed seconds of its tests (set-up, call and teardown), rounded to 0.1 s."""
    totals = {}
    for nodeid, seconds in durations_by_nodeid.items():
        totals[module_of(nodeid)] = totals.get(module_of(nodeid), 0.0) + seconds
    return {k: round(v, 1) for k, v in sorted(totals.items())}


def write_durations(totals, path=DURATIONS_FILE):
    """Write ``module -> seconds`` as sorted JSON, atomically (temp file + rename)."""
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(totals, f, indent=1, sort_keys=True)
        f.write('\n')
    os.replace(tmp, path)


def make_module_scheduling(config, log):
    """A ``ModuleScheduling`` (defined here, so that this module imports without xdist)."""
    from xdist.scheduler import LoadScheduling  # pylint: disable=import-outside-toplevel

    class ModuleScheduling(LoadScheduling):
        """xdist's ``load`` scheduling, handing out one whole module at a time.

        The collection arrives already ordered (``order_by_module_duration``, applied on every
        worker by ``tests/conftest.py``), so the module at the front of the pending tests is the
        longest one left. A worker gets the next module when it has fewer than two tests left:
        an xdist worker only starts a test once it knows the one after it, so at one test left it
        would idle. A crashed worker's tests go back to the pending list as with ``load``
        (``LoadScheduling.remove_node``), and its crashing test is reported, not retried.
        """

        def schedule(self):
            """Check the workers collected the same tests, then give each its first module."""
            assert self.collection_is_completed
            if self.collection is not None:
                for node in self.nodes:
                    self.check_schedule(node)
                return
            if not self._check_nodes_have_same_collection():
                self.log('**Different tests collected, aborting run**')
                return
            self.collection = list(next(iter(self.node2collection.values())))
            self.pending[:] = range(len(self.collection))
            self.lookahead = set()
            for node in self.nodes:
                self.check_schedule(node)

        def check_schedule(self, node, duration=0):  # pylint: disable=unused-argument
            """Keep two tests queued on ``node``; shut workers down once none is left to hand out.

            An xdist worker starts a test only once it knows the one after it, so a worker
            with one test queued idles. A worker about to be free (nothing queued, or only a
            short look-ahead) gets the longest module left; a worker still busy with a test of
            its own gets the shortest module left as its look-ahead, which costs the schedule
            next to nothing.
            """
            if node.shutting_down:
                return
            mine = self.node2pending[node]
            while len(mine) < 2 and self.pending:
                self._send_module(node, longest=not mine or mine[0] in self.lookahead)
            if not self.pending:
                # a worker's last test must learn it is the last, or the worker waits for more
                for other in self.nodes:
                    if len(self.node2pending[other]) < 2 and not other.shutting_down:
                        other.shutdown()

        def _send_module(self, node, longest):
            """Send ``node`` the module at the front (longest) or the back (shortest) of the
            pending tests, whole."""
            ends = self.pending if longest else self.pending[::-1]
            module = module_of(self.collection[ends[0]])
            size = 0
            for index in ends:
                if module_of(self.collection[index]) != module:
                    break
                size += 1
            if longest:
                tests = self.pending[:size]
                del self.pending[:size]
            else:
                tests = self.pending[len(self.pending) - size:]
                del self.pending[len(self.pending) - size:]
                self.lookahead.update(tests)
            self.node2pending[node].extend(tests)
            node.send_runtest_some(tests)

    return ModuleScheduling(config, log)
