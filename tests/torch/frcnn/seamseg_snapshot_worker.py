"""seamseg's own snapshot code on a snapshot file, in a process of its own (run by
``test_frcnn_snapshot.py`` when ``GLUONTRAIN_REFERENCES`` is set).

Usage: ``python seamseg_snapshot_worker.py SNAPSHOT_IN SNAPSHOT_OUT``

1. builds seamseg's detection network with its ``scripts/train_detection.py`` ``make_model``
   (its default ``detection.ini``, 80 thing classes), compiled extensions stubbed as in
   ``tests/fixtures/make_reference_fixtures.py`` (nothing of them runs: no forward pass);
2. fills every tensor of ``body`` / ``rpn_head`` / ``roi_head`` with ``-1`` and loads
   ``SNAPSHOT_IN`` with seamseg's ``resume_from_snapshot``; reports, per module, the tensors
   of the model now equal to the file's, the model's tensors the file lacks and the file's
   the model lacks (seamseg's lenient load would skip those silently);
3. fills the modules with :func:`marker` values and writes them with seamseg's own
   ``save_snapshot`` to ``SNAPSHOT_OUT``.

Prints one JSON line. Stubs are process-wide, which is why this is not run in pytest's.
"""
import importlib.util
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, '..', '..', 'fixtures')
MODULES = ('body', 'rpn_head', 'roi_head')


def marker(module_index, key_index):
    """A value unique to each tensor of a snapshot (the test checks each landed in place)."""
    return float(1000 * (module_index + 1) + key_index)


def seamseg_script():
    """seamseg's ``scripts/train_detection.py`` as a module, extensions stubbed."""
    sys.path.insert(0, FIXTURES)
    import make_reference_fixtures as mrf  # pylint: disable=import-outside-toplevel,import-error
    mrf.reference_root('inplace_abn')
    root = mrf.reference_root('seamseg')
    mrf.install_stubs(['torchvision', 'torchvision.*', 'umsgpack', 'inplace_abn._backend',
                       'seamseg.*._backend', 'seamseg._version'],
                      {'seamseg._version': {'version': 'source'}})
    spec = importlib.util.spec_from_file_location(
        'seamseg_train_detection', os.path.join(root, 'scripts', 'train_detection.py'))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.log_debug = lambda *a, **k: None  # needs torch.distributed initialised
    return script


def main(src, dst):
    """See the module docstring."""
    script = seamseg_script()
    from seamseg.utils import snapshot  # pylint: disable=import-outside-toplevel,import-error
    config = script.load_config(script.DEFAULT_CONFIGS['detection'],
                                script.DEFAULT_CONFIGS['detection'])
    model = script.make_model(config, 80, 0)
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
    with torch.no_grad():
        for m, name in enumerate(MODULES):
            for i, value in enumerate(getattr(model, name).state_dict().values()):
                value.fill_(marker(m, i))
    snapshot.save_snapshot(dst, config, 3, 0.5, 0.5, 42,
                           **{name: getattr(model, name).state_dict() for name in MODULES})
    print(json.dumps(result))


if __name__ == '__main__':
    main(*sys.argv[1:3])
