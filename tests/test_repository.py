"""Facts of the repository itself: no machine's absolute paths, CI runs README command (b), no
import circles in the package, no module that only the tests reach."""
import ast
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


def test_tox_leaves_readme_command_a_its_venv_folder():
    """README command (a) creates its venv at ``.venv``; tox >= 4.66 would put a ``.venv``
    redirect file there after command (b) unless ``venv_redirect = false``."""
    import configparser  # pylint: disable=import-outside-toplevel
    with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
        readme = f.read()
    assert 'python3 -m venv .venv' in readme[readme.index('**(a)'):readme.index('**(b)')]
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(os.path.join(ROOT, 'tox.ini'), encoding='utf-8')
    assert tox.getboolean('tox', 'venv_redirect') is False


def _module_imports(root):
    """``{module: set of gluontrain modules it imports}``, counting imports anywhere in the
    file (a deferred import inside a function ties two modules as much as a top-level one)."""
    modules = {}
    for folder, _, files in os.walk(os.path.join(root, 'gluontrain')):
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, root)[:-3].replace(os.sep, '.')
                modules[dotted[:-len('.__init__')] if dotted.endswith('.__init__')
                        else dotted] = path
    edges = {}
    for mod, path in modules.items():
        package = mod.split('.') if path.endswith('__init__.py') else mod.split('.')[:-1]
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read())
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                source = '.'.join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    sub = source + '.' + alias.name
                    if sub in modules:
                        targets.add(sub)
                    elif source in modules:
                        targets.add(source)
        edges[mod] = targets - {mod}
    return edges


def _circles(edges):
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_circle_finder_finds_a_planted_circle():
    edges = {'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}
    assert _circles(edges) == [['a', 'b', 'c']]


def test_no_import_circles_in_the_package():
    edges = _module_imports(ROOT)
    assert len(edges) > 100 and 'gluontrain.core.loop' in edges
    assert _circles(edges) == []


def _floors():
    """``{module prefix: floor}`` from docs/layout.md's "Floors" table."""
    with open(os.path.join(ROOT, 'docs', 'layout.md'), encoding='utf-8') as f:
        text = f.read()
    table = text[text.index('## Floors'):text.index('## One layout for every recipe')]
    floors = {}
    for line in table.splitlines():
        match = re.match(r'^\| (\d) \| (.*) \|$', line)
        if match:
            for name in re.findall(r'`(gluontrain[\w.]*)`', match.group(2)):
                floors[name] = int(match.group(1))
    return floors


def _floor_of(module, floors):
    parts = module.split('.')
    for n in range(len(parts), 0, -1):
        if '.'.join(parts[:n]) in floors:
            return floors['.'.join(parts[:n])]
    raise AssertionError('{} is on no floor of docs/layout.md'.format(module))


def test_no_module_imports_a_higher_floor():
    floors = _floors()
    assert floors['gluontrain.core'] == 1 and floors['gluontrain.tool_route'] == 5
    edges = _module_imports(ROOT)
    up = sorted('{} -> {}'.format(mod, target) for mod, targets in edges.items()
                for target in targets if _floor_of(target, floors) > _floor_of(mod, floors))
    assert up == []


def test_the_floor_check_sees_an_import_that_runs_up():
    floors = {'gluontrain.core': 1, 'gluontrain.torch': 4}
    assert _floor_of('gluontrain.torch.yolo3.model', floors) == 4
    assert _floor_of('gluontrain.core.loop', floors) < _floor_of('gluontrain.torch', floors)
    with pytest.raises(AssertionError, match='on no floor'):
        _floor_of('gluontrain.elsewhere', floors)


def test_no_two_test_files_share_a_name():
    """pytest imports test files without packages by their base name: a second
    ``test_data.py`` anywhere under tests/ is an 'import file mismatch' error for the suite."""
    names = {}
    for rel in _tracked_files():
        base = os.path.basename(rel)
        if rel.startswith('tests/') and base.startswith('test_') and base.endswith('.py'):
            names.setdefault(base, []).append(rel)
    assert len(names) > 100
    assert {b: paths for b, paths in names.items() if len(paths) > 1} == {}


# modules no script, bench, notebook or recipe imports, kept as public API for users' own code
PUBLIC_ONLY = {
    # GluonCV 0.3's LRScheduler for train() cells written against it (docs/from_gluoncv.md)
    'gluontrain.mx.compat',
}
_DOTTED = re.compile(r"""['"](gluontrain(?:\.\w+)+)['"]""")
_IMPORTED = re.compile(r'^\s*(?:from|import)\s+(gluontrain(?:\.\w+)*)(?:\s+import\s+([\w, ]+))?',
                       re.M)


def _entry_modules(root, modules):
    """The gluontrain modules that scripts/, bench/, notebooks/ and the CLI import, and the
    dotted names any module spells out (the registry imports recipes by name)."""
    texts = []
    for sub, ext in (('scripts', '.py'), ('bench', '.py'), ('notebooks', '.ipynb')):
        for folder, _, files in os.walk(os.path.join(root, sub)):
            texts += [open(os.path.join(folder, n), encoding='utf-8').read()
                      for n in files if n.endswith(ext)]
    entries = {'gluontrain.__main__', 'gluontrain.registry'}
    for text in texts + [open(p, encoding='utf-8').read() for p in modules.values()]:
        entries.update(_DOTTED.findall(text))
    for text in texts:
        # notebooks hold their cells as JSON strings: each source line starts a string
        for line in text.replace('\\n', '\n').replace('"', '\n').splitlines():
            match = _IMPORTED.match(line)
            if match:
                names = (match.group(2) or '').replace(' ', '').split(',')
                entries.update([match.group(1)] + [match.group(1) + '.' + n for n in names])
    return {m for m in entries if m in modules}


def test_every_module_is_reached_from_a_script_bench_notebook_or_recipe():
    edges = _module_imports(ROOT)
    modules = dict.fromkeys(edges)
    for folder, _, files in os.walk(os.path.join(ROOT, 'gluontrain')):
        for name in files:
            if name.endswith('.py'):
                dotted = os.path.relpath(os.path.join(folder, name), ROOT)[:-3]
                modules[dotted.replace(os.sep, '.').replace('.__init__', '')] = \
                    os.path.join(folder, name)
    reached, todo = set(), sorted(_entry_modules(ROOT, modules))
    while todo:
        mod = todo.pop()
        if mod in reached:
            continue
        # importing a module imports the packages above it
        parents = {'.'.join(mod.split('.')[:i]) for i in range(1, mod.count('.') + 1)}
        reached.add(mod)
        todo += sorted((edges[mod] | (parents & set(modules))) - reached)
    assert 'gluontrain.torch.sgg.modeling.predictors.motifs' in reached
    assert sorted(set(modules) - reached - PUBLIC_ONLY) == []
    assert sorted(PUBLIC_ONLY - set(modules)) == []


# Every call in the package that turns bytes from a file into objects, and why nothing in
# such a file can run (issue 40; docs/checkpoints.md, "What a file may contain"). A new
# call fails this test until it is reviewed and listed here.
DESERIALIZERS = {
    ('gluontrain/core/checkpoint.py', '_RestrictedUnpickler'): 'an allow-list of globals',
    ('gluontrain/torch/sgg/modeling/c2_loading.py', '_C2Unpickler'): 'numpy globals only',
    ('gluontrain/mx/yolo3/weights.py', '_KeysOnly'): 'every global is a stub (dict keys only)',
    ('gluontrain/mx/yolo3/recipe.py', 'load_frombuffer'): 'check_params_bytes first',
    ('gluontrain/mx/yolo3/weights.py', 'load_frombuffer'): 'read_params_bytes first',
    ('gluontrain/mx/yolo3/infer.py', 'imports'): 'check_exported_graph, check_params_file',
    ('gluontrain/mx/distributed.py', 'loads'): "the job's own ranks' bytes, never a file",
    ('gluontrain/torch/checkpoint.py', 'load'): 'weights_only',
    ('gluontrain/torch/weights.py', 'load'): 'weights_only',
    ('gluontrain/torch/sgg/evaluation/zeroshot.py', 'load'): 'weights_only',
    ('gluontrain/torch/sgg/modeling/predictors/utils_motifs.py', 'load'): 'weights_only',
}
_LOADER_CALLS = {('pickle', 'load'), ('pickle', 'loads'), ('torch', 'load'), ('nd', 'load'),
                 ('nd', 'load_frombuffer'), ('SymbolBlock', 'imports'), ('np', 'load'),
                 ('numpy', 'load'), ('yaml', 'unsafe_load'), ('yaml', 'load'),
                 ('marshal', 'loads'), ('dill', 'loads'), ('joblib', 'load')}


def _loader_sites():
    """(file, name, line, call source) of every deserializing call and Unpickler subclass."""
    sites = []
    for rel in _tracked_files():
        if not (rel.startswith('gluontrain/') and rel.endswith('.py')):
            continue
        with open(os.path.join(ROOT, rel), encoding='utf-8') as f:
            source = f.read()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and any(
                    'Unpickler' in ast.unparse(base) for base in node.bases):
                sites.append((rel, node.name, node.lineno, ''))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value
                owner = owner.attr if isinstance(owner, ast.Attribute) else getattr(
                    owner, 'id', '')
                if (owner, node.func.attr) in _LOADER_CALLS or node.func.attr == 'load_states':
                    sites.append((rel, node.func.attr, node.lineno, ast.unparse(node)))
    return sites


def test_every_loader_in_the_package_is_reviewed_and_cannot_run_code():
    sites = _loader_sites()
    unreviewed = ['{}:{} {}'.format(rel, line, call or name) for rel, name, line, call in sites
                  if (rel, name) not in DESERIALIZERS]
    assert not unreviewed, 'deserializing calls nobody reviewed (list them in ' \
        'DESERIALIZERS with what keeps code from running):\n' + '\n'.join(unreviewed)
    unsafe = ['{}:{} {}'.format(rel, line, call) for rel, name, line, call in sites
              if name == 'load' and call.startswith('torch.load')
              and 'weights_only=True' not in call and 'weights_only=weights_only' not in call]
    assert not unsafe, 'torch.load without weights_only=True:\n' + '\n'.join(unsafe)
    # every reviewed site still exists (a stale entry would hide a moved call)
    found = {(rel, name) for rel, name, _, _ in sites}
    assert set(DESERIALIZERS) <= found, set(DESERIALIZERS) - found


def test_no_loader_switches_torch_weights_only_off():
    found = []
    for rel in _tracked_files():
        if rel.startswith('gluontrain/') and rel.endswith('.py'):
            with open(os.path.join(ROOT, rel), encoding='utf-8') as f:
                if re.search(r'weights_only\s*=\s*False', f.read()):
                    found.append(rel)
    assert not found, found
