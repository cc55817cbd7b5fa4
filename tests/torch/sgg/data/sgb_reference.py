"""Scene-Graph-Benchmark's own data code, run from the bare mirror when it is present: the live
handle of the ``sgb_data_*`` recordings (``tests/fixtures/recorded.py``).

Loads ``maskrcnn_benchmark/structures/bounding_box.py``, ``boxlist_ops.py`` (its compiled
``nms`` import stubbed, unused here), ``data/datasets/visual_genome.py``,
``data/transforms/transforms.py`` (torchvision's functional API stubbed where torchvision is
missing: only ``get_size`` is compared) and the three ``data/samplers`` files as modules. Two
source edits, both the bugs gluontrain fixes: the ``len == 108073`` asserts are removed, and
``get_VG_statistics``'s fixed ``num_val_im=5000`` reads the module global ``NUM_VAL_IM``.

The ``maskrcnn_benchmark*`` entries (and any stub) put in ``sys.modules`` for the modules'
imports are removed again once all are loaded: the modules keep what they imported, and other
test modules of the same process never see SGB's package.
"""
import sys
import tempfile
import types

from fixtures.recorded import reference_source, source_module

from gluontrain.data import vg

CHECKOUT = 'Scene-Graph-Benchmark.pytorch'
#: ``handle attribute -> (module name, SGB file)``, in load order (later ones import earlier).
FILES = {
    'bounding_box': ('maskrcnn_benchmark.structures.bounding_box',
                     'maskrcnn_benchmark/structures/bounding_box.py'),
    'boxlist_ops': ('maskrcnn_benchmark.structures.boxlist_ops',
                    'maskrcnn_benchmark/structures/boxlist_ops.py'),
    'visual_genome': ('maskrcnn_benchmark.data.datasets.visual_genome',
                      'maskrcnn_benchmark/data/datasets/visual_genome.py'),
    'transforms': ('sgb_transforms', 'maskrcnn_benchmark/data/transforms/transforms.py'),
    'grouped': ('sgb_grouped', 'maskrcnn_benchmark/data/samplers/grouped_batch_sampler.py'),
    'iteration': ('sgb_iteration',
                  'maskrcnn_benchmark/data/samplers/iteration_based_batch_sampler.py'),
    'distributed': ('sgb_distributed', 'maskrcnn_benchmark/data/samplers/distributed.py'),
}
_CACHE = {}


def _edit(attr, src):
    """The two bug edits of ``visual_genome.py`` and ``boxlist_ops``' relative import."""
    if attr == 'boxlist_ops':
        return src.replace('from .bounding_box import',
                           'from maskrcnn_benchmark.structures.bounding_box import')
    if attr == 'visual_genome':
        for line in ('    assert len(fns) == 108073\n', '    assert len(img_info) == 108073\n'):
            assert line in src
            src = src.replace(line, '')
        assert 'num_val_im=5000, ' in src
        src = src.replace('num_val_im=5000, ', 'num_val_im=NUM_VAL_IM, ')
    return src


def _stubs():
    """``{name: module}`` standing in for what the files import but the comparisons never
    run: SGB's package nodes, its compiled ``nms``, and torchvision / scipy when missing."""
    stubs = {}
    for pkg in ('maskrcnn_benchmark', 'maskrcnn_benchmark.structures',
                'maskrcnn_benchmark.data', 'maskrcnn_benchmark.data.datasets'):
        stubs[pkg] = types.ModuleType(pkg)
        stubs[pkg].__path__ = []
    stubs['maskrcnn_benchmark.layers'] = types.ModuleType('maskrcnn_benchmark.layers')
    stubs['maskrcnn_benchmark.layers'].nms = None
    try:
        import scipy.linalg  # noqa: F401 pylint: disable=unused-import,import-outside-toplevel
    except ImportError:
        stubs['scipy'] = types.ModuleType('scipy')
        stubs['scipy.linalg'] = types.ModuleType('scipy.linalg')
    try:
        import torchvision  # noqa: F401 pylint: disable=unused-import,import-outside-toplevel
    except ImportError:
        tv = types.ModuleType('torchvision')
        tv.transforms = types.ModuleType('torchvision.transforms')
        tv.transforms.functional = types.ModuleType('torchvision.transforms.functional')
        stubs.update({'torchvision': tv, 'torchvision.transforms': tv.transforms,
                      'torchvision.transforms.functional': tv.transforms.functional})
    return stubs


def load():
    """SGB's data modules as a namespace (attributes as :data:`FILES`), or None without the
    mirror; loaded once per process."""
    if 'handle' in _CACHE:
        return _CACHE['handle']
    sources = {attr: reference_source(CHECKOUT, path) for attr, (_, path) in FILES.items()}
    if not all(sources.values()):
        _CACHE['handle'] = None
        return None
    stubs = _stubs()
    names = list(stubs) + [name for name, _ in FILES.values()]
    saved = {name: sys.modules[name] for name in names if name in sys.modules}
    sys.modules.update({name: mod for name, mod in stubs.items()
                        if name.startswith('maskrcnn_benchmark') or name not in saved})
    mods = {}
    try:
        for attr, (name, _) in FILES.items():
            mods[attr] = source_module(name, _edit(attr, sources[attr]))
            if name.startswith('maskrcnn_benchmark.'):
                sys.modules[name] = mods[attr]  # imported by the next files
    finally:  # nothing of SGB's (nor a stub) stays in sys.modules
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
    mods['visual_genome'].NUM_VAL_IM = 5000
    _CACHE['handle'] = types.SimpleNamespace(**mods)
    return _CACHE['handle']


def generated_vg():
    """A fresh copy of the ``gen_root`` fixture's generated dataset (``conftest.py``: the same
    generator, seed and sizes), in a temporary folder; returns the folder object (its
    ``.name`` is the root; the folder goes when the object is dropped)."""
    tmp = tempfile.TemporaryDirectory(prefix='sgb-vg-')
    vg.write_vg(tmp.name, num_train=16, num_val=6, seed=0, image_size=(40, 90))
    return tmp

