"""Facts of the repository itself: no machine's absolute paths, CI runs README command (b)."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# home, work and temporary directories of a particular machine (written in pieces so that
# this file does not match itself)
MACHINE_PATHS = '|'.join(['/' + d + '/' for d in ('tmp', 'home', 'work', 'root', 'Users',
                                                  'private/var', 'mnt/data')])


def _tracked_files():
    res = subprocess.run(['git', 'ls-files', '-z'], cwd=ROOT, capture_output=True, check=False)
    if res.returncode:
        pytest.skip('not a git checkout: the repository facts are checked on a clone')
    return [f for f in res.stdout.decode().split('\0') if f]


def test_no_absolute_path_of_a_machine_in_any_tracked_file():
    pattern = re.compile(MACHINE_PATHS)
    found = []
    for rel in _tracked_files():
        path = os.path.join(ROOT, rel)
        if not os.path.isfile(path):
            continue
        with open(path, 'rb') as f:
            data = f.read()
        if b'\0' in data[:8000]:  # binary (.npz, .png)
            continue
        for n, line in enumerate(data.decode('utf-8', 'replace').splitlines(), 1):
            if pattern.search(line):
                found.append('%s:%d: %s' % (rel, n, line.strip()[:120]))
    assert not found, '\n'.join(found[:20])


def test_ci_runs_exactly_readme_command_b():
    with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
        readme = f.read()
    section = readme[readme.index('**(b)'):]
    command = re.search(r'```(?:bash|sh)?\n(.*?)\n```', section, re.S).group(1).strip()
    with open(os.path.join(ROOT, '.ci', 'run'), encoding='utf-8') as f:
        lines = [line for line in f.read().splitlines() if line and not line.startswith('#')]
    assert lines[-1] == command
