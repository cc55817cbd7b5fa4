"""Scene-graph generation (Scene-Graph-Benchmark.pytorch's relation training) in plain PyTorch.

Recipes ``gluontrain.get_recipe('sgg')`` (:mod:`.recipe`, SGB ``tools/relation_train_net.py``)
and ``'sgg-detector'`` (:mod:`.detector_recipe`, ``tools/detector_pretrain_net.py``); scripts
``scripts/train_relation.py`` and ``scripts/pretrain_detector.py``. SGB's yacs config is
:mod:`.config`, the shipped small configs are in ``configs/``; data in :mod:`.data`, the model
in :mod:`.model` (its parts in :mod:`.modeling`), the evaluation in :mod:`.evaluation`; the
training pieces: :mod:`.step`, :mod:`.hooks`, :mod:`.solver`, :mod:`.checkpoint`,
:mod:`.trainer` (SGB's ``train()``), :mod:`.inference` (``run_val`` / ``run_test``) and
:mod:`.launch` (device, process group, logger).
"""
