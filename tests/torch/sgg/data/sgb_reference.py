"""Scene-Graph-Benchmark's own data code, run from the bare mirror when it is present.

Loads ``maskrcnn_benchmark/structures/bounding_box.py``, ``boxlist_ops.py`` (its compiled
``nms`` import stubbed, unused here), ``data/datasets/visual_genome.py`` and
``data/transforms/transforms.py`` (torchvision's functional API replaced by PIL/torch equivalents
only where torchvision is missing) as modules. Two source edits, both the bugs gluontrain fixes:
the ``len == 108073`` asserts are removed, and ``get_VG_statistics``'s fixed
``num_val_im=5000`` reads the module global ``NUM_VAL_IM``.
"""
import os
import subprocess
import sys
import types

# The git directory of a Scene-Graph-Benchmark checkout under $GLUONTRAIN_REFERENCES
# (docs/testing.md); '' (tests skip) when it is not set.
_REFS = os.environ.get('GLUONTRAIN_REFERENCES', '')
MIRROR = os.path.join(_REFS, 'Scene-Graph-Benchmark.pytorch', '.git') if _REFS else ''


def _source(path):
    out = subprocess.run(['git', '--git-dir', MIRROR, 'show', 'HEAD:' + path],
                         capture_output=True, text=True, check=False)
    return out.stdout or None


def _module(name, src):
    mod = types.ModuleType(name)
    mod.__file__ = name
    sys.modules[name] = mod
    exec(compile(src, name, 'exec'), mod.__dict__)  # pylint: disable=exec-used
    return mod


def load():
    """SGB's ``visual_genome`` module, or None without the mirror."""
    if not os.path.isdir(MIRROR):
        return None
    if 'maskrcnn_benchmark.data.datasets.visual_genome' in sys.modules:
        return sys.modules['maskrcnn_benchmark.data.datasets.visual_genome']
    sources = {p: _source(p) for p in (
        'maskrcnn_benchmark/structures/bounding_box.py',
        'maskrcnn_benchmark/structures/boxlist_ops.py',
        'maskrcnn_benchmark/data/datasets/visual_genome.py')}
    if not all(sources.values()):
        return None
    for pkg in ('maskrcnn_benchmark', 'maskrcnn_benchmark.structures',
                'maskrcnn_benchmark.data', 'maskrcnn_benchmark.data.datasets'):
        mod = types.ModuleType(pkg)
        mod.__path__ = []
        sys.modules.setdefault(pkg, mod)
    layers = types.ModuleType('maskrcnn_benchmark.layers')
    layers.nms = None
    sys.modules.setdefault('maskrcnn_benchmark.layers', layers)
    if 'scipy' not in sys.modules:
        try:
            import scipy.linalg  # noqa: F401 pylint: disable=unused-import,import-outside-toplevel
        except ImportError:
            sys.modules['scipy'] = types.ModuleType('scipy')
            sys.modules['scipy.linalg'] = types.ModuleType('scipy.linalg')
    _module('maskrcnn_benchmark.structures.bounding_box',
            sources['maskrcnn_benchmark/structures/bounding_box.py'])
    ops = sources['maskrcnn_benchmark/structures/boxlist_ops.py'].replace(
        'from .bounding_box import', 'from maskrcnn_benchmark.structures.bounding_box import')
    _module('maskrcnn_benchmark.structures.boxlist_ops', ops)
    src = sources['maskrcnn_benchmark/data/datasets/visual_genome.py']
    for line in ('    assert len(fns) == 108073\n', '    assert len(img_info) == 108073\n'):
        assert line in src
        src = src.replace(line, '')
    assert 'num_val_im=5000, ' in src
    src = src.replace('num_val_im=5000, ', 'num_val_im=NUM_VAL_IM, ')
    mod = _module('maskrcnn_benchmark.data.datasets.visual_genome', src)
    mod.NUM_VAL_IM = 5000
    return mod


def load_file(path, name):
    """Another SGB source file as module ``name`` (after :func:`load`), or None.

    ``data/transforms/transforms.py`` gets a torchvision stub when torchvision is missing
    (only ``get_size`` and the samplers are compared; nothing calls the stub).
    """
    if load() is None:
        return None
    src = _source(path)
    if src is None:
        return None
    if 'torchvision' in src:
        try:
            import torchvision  # noqa: F401 pylint: disable=unused-import,import-outside-toplevel
        except ImportError:
            tv = types.ModuleType('torchvision')
            tv.transforms = types.ModuleType('torchvision.transforms')
            tv.transforms.functional = types.ModuleType('torchvision.transforms.functional')
            sys.modules.update({'torchvision': tv, 'torchvision.transforms': tv.transforms,
                                'torchvision.transforms.functional': tv.transforms.functional})
    return _module(name, src)
