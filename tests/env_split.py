"""Tests run once in README command (b): what the newest-Python env runs, py311 leaves to it.

``tox p`` runs two environments at once on the same cores: ``py311`` (the whole suite, MXNet and
PyTorch) and ``torch-py313`` (the PyTorch tests without MXNet, on Python 3.13 and numpy 2). The
second's tests are a subset of the first's; run twice, they cost their CPU twice on a machine
that the suite keeps busy (docs/testing.md, "Budget"). ``tests/newest_python.txt`` lists the
tests ``torch-py313`` ran and passed (not those it skipped for lack of MXNet):

* ``--must-pass FILE`` (torch-py313's default): every listed test must pass in this run; one
  that did not run or was skipped fails the session with its name, so that a test cannot be
  left to an environment that does not run it.
* ``--tested-elsewhere FILE`` (py311's default): the listed tests are deselected, and the summary
  says how many and where they run (``tox -e py311 -- tests`` runs them here too).

``GLUONTRAIN_WRITE_NEWEST_PYTHON=1 tox -e torch-py313`` rewrites the file from a run. A test
whose subject is what the environment has installed (what an import pulls in, the refusal of
the MXNet backend, torchvision's kernels or their absence) means something else in each, and is
never listed (``RUN_IN_BOTH``).
"""
import os

LIST_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'newest_python.txt')
HEADER = ('# The tests that tox\'s torch-py313 env (Python 3.13, numpy 2, no MXNet) ran and passed;\n'
          '# py311 leaves them to it in README command (b) (tests/env_split.py). Rewritten by\n'
          '# GLUONTRAIN_WRITE_NEWEST_PYTHON=1 tox -e torch-py313; made on {}.\n')


#: node ids containing one of these run in both environments: their outcome depends on what is
#: installed (MXNet beside torch, torchvision or not), so one environment cannot stand for both
RUN_IN_BOTH = ('tests/torch/ops/test_compiled.py', 'tests/yolo3/test_backend_python.py',
               'import')


def listable(nodeid):
    """Whether ``nodeid`` may be left to one environment (not matched by ``RUN_IN_BOTH``)."""
    return not any(part in nodeid for part in RUN_IN_BOTH)


def read_list(path):
    """The node ids listed in ``path`` (one a line; ``#`` comments and blank lines skipped)."""
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith('#')]


def write_list(path, nodeids, made_on):
    """Write the ``listable`` ones of ``nodeids`` sorted, under the header naming the run that
    made them."""
    with open(path, 'w') as f:
        f.write(HEADER.format(made_on))
        f.writelines(n + '\n' for n in sorted(set(nodeids)) if listable(n))


def split_items(items, listed):
    """``(kept, deselected)``: ``items`` whose node id is not / is in ``listed``."""
    listed = set(listed)
    kept = [i for i in items if i.nodeid not in listed]
    return kept, [i for i in items if i.nodeid in listed]


def not_passed(listed, passed):
    """The listed node ids that are not among ``passed``, in the list's order."""
    passed = set(passed)
    return [n for n in listed if n not in passed]
