"""seamseg's own snapshot code, in a process of its own (run by ``test_frcnn_snapshot.py``'s
``seamseg_snapshot`` recorder and its live-only test when ``GLUONTRAIN_REFERENCES`` is set).

Usage: ``python seamseg_snapshot_worker.py [SNAPSHOT_IN]``

1. builds seamseg's detection network with its ``scripts/train_detection.py`` ``make_model``
   (its default ``detection.ini``, 80 thing classes), compiled extensions stubbed as in
   ``tests/fixtures/make_reference_fixtures.py`` (nothing of them runs: no forward pass);
   reports, per module, the ``(key, shape, dtype)`` of its state_dict, in order: what
   seamseg's ``resume_from_snapshot`` compares a snapshot with and loads into;
2. with ``SNAPSHOT_IN``: fills every tensor of ``body`` / ``rpn_head`` / ``roi_head`` with
   ``-1`` and loads it with seamseg's ``resume_from_snapshot``; reports, per module, the
   tensors of the model now equal to the file's, the model's tensors the file lacks and the
   file's the model lacks (seamseg's lenient load would skip those silently);
3. fills the modules with :func:`marker` values, writes them with seamseg's own
   ``save_snapshot`` (epoch 3, scores 0.5, step 42) and reports what it wrote, as
   :func:`skeleton` (each tensor's shape, dtype and its one value: checked constant).

Prints one JSON line: ``{"model": ..., "resume": ... (with SNAPSHOT_IN), "written": ...}``.
Stubs are process-wide, which is why this is not run in pytest's.
"""
import collections
import importlib.util
import json
import os
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, '..', '..', 'fixtures')
MODULES = ('body', 'rpn_head', 'roi_head')


def marker(module_index, key_index):
    """A value unique to each tensor of a snapshot (the test checks each landed in place)."""
    return float(1000 * (module_index + 1) + key_index)


def skeleton(value):
    """``value`` (a loaded snapshot) as JSON-able data: every container and key with its type
    (dict, OrderedDict with its ``_metadata``, list, tuple), every number / text as is, every
    tensor as ``{"tensor": [shape, dtype, value]}`` (all its elements equal that value)."""
    if isinstance(value, torch.Tensor):
        flat = value.flatten()
        assert flat.numel() and bool((flat == flat[0]).all()), 'a tensor is not constant'
        return {'tensor': [list(value.shape), str(value.dtype), flat[0].item()]}
    if isinstance(value, dict):
        out = {'odict' if isinstance(value, collections.OrderedDict) else 'dict':
               [[skeleton(k), skeleton(v)] for k, v in value.items()]}
        if getattr(value, '_metadata', None) is not None:
            out['meta'] = skeleton(value._metadata)  # pylint: disable=protected-access
        return out
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [skeleton(v) for v in value]}
    assert value is None or isinstance(value, (bool, int, float, str)), type(value)
    return {'value': value}


def rebuild(tree, tensor, path=()):
    """The object of a :func:`skeleton`; ``tensor(path, shape, dtype, value)`` makes each
    tensor."""
    (kind, content), = ((k, v) for k, v in tree.items() if k != 'meta')
    if kind == 'tensor':
        return tensor(path, tuple(content[0]), content[1], content[2])
    if kind == 'value':
        return content
    if kind in ('list', 'tuple'):
        items = [rebuild(v, tensor, path + (i,)) for i, v in enumerate(content)]
        return items if kind == 'list' else tuple(items)
    out = (collections.OrderedDict if kind == 'odict' else dict)()
    for k, v in content:
        key = rebuild(k, tensor)
        out[key] = rebuild(v, tensor, path + (key,))
    if 'meta' in tree:
        out._metadata = rebuild(tree['meta'], tensor)  # pylint: disable=protected-access
    return out


def seamseg_script():
    """seamseg's ``scripts/train_detection.py`` as a module, extensions stubbed."""
    sys.path.insert(0, FIXTURES)
    import make_reference_fixtures as mrf  # pylint: disable=import-outside-toplevel,import-error
    mrf.reference_root('inplace_abn')
    root = mrf.reference_root('seamseg')
    mrf.install_stubs(['torchvision', 'torchvision.*', 'inplace_abn._backend',
                       'seamseg.*._backend', 'seamseg._version'],
                      {'seamseg._version': {'version': 'source'}})
    spec = importlib.util.spec_from_file_location(
        'seamseg_train_detection', os.path.join(root, 'scripts', 'train_detection.py'))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.log_debug = lambda *a, **k: None  # needs torch.distributed initialised
    return script


def _resume(snapshot, model, src):
    """Step 2 of the module docstring."""
    with torch.no_grad():
        for name in MODULES:
            for value in getattr(model, name).state_dict().values():
                value.fill_(-1)
    snapshot.resume_from_snapshot(model, src, list(MODULES))
    saved = torch.load(src, map_location='cpu', weights_only=True)['state_dict']
    result = {}
    for name in MODULES:
        own, theirs = getattr(model, name).state_dict(), saved[name]
        result[name] = {
            'equal': sum(1 for k, v in own.items() if k in theirs and torch.equal(
                v, theirs[k].to(v.dtype))),
            'total': len(own),
            'not_in_file': sorted(set(own) - set(theirs)),
            'not_in_model': sorted(set(theirs) - set(own))}
    return result


def main(src=None):
    """See the module docstring."""
    script = seamseg_script()
    from seamseg.utils import snapshot  # pylint: disable=import-outside-toplevel,import-error
    config = script.load_config(script.DEFAULT_CONFIGS['detection'],
                                script.DEFAULT_CONFIGS['detection'])
    model = script.make_model(config, 80, 0)
    result = {'model': {name: [[k, list(v.shape), str(v.dtype)]
                               for k, v in getattr(model, name).state_dict().items()]
                        for name in MODULES}}
    if src:
        result['resume'] = _resume(snapshot, model, src)
    with torch.no_grad():
        for m, name in enumerate(MODULES):
            for i, value in enumerate(getattr(model, name).state_dict().values()):
                value.fill_(marker(m, i))
    with tempfile.TemporaryDirectory() as tmp:
        dst = os.path.join(tmp, 'theirs.pth.tar')
        snapshot.save_snapshot(dst, config, 3, 0.5, 0.5, 42,
                               **{name: getattr(model, name).state_dict() for name in MODULES})
        result['written'] = skeleton(torch.load(dst, map_location='cpu', weights_only=True))
    print(json.dumps(result, sort_keys=True))


if __name__ == '__main__':
    main(*sys.argv[1:2])
