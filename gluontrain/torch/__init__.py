"""PyTorch backend of gluontrain: GluonCV's training idioms for PyTorch code.

Modules (import the one you need; importing this package loads none of them):

- :mod:`~gluontrain.torch.batchify` -- ``Stack``, ``Pad``, ``Append``, ``Tuple`` as a
  ``DataLoader`` ``collate_fn``, with GluonCV's shapes, values and dtype rules;
- :mod:`~gluontrain.torch.lr_scheduler` -- ``GluonLRScheduler`` (GluonCV's schedules, lr of
  update k at the k-th ``optimizer.step()``) and ``LRSchedulerHook`` for the core loop;
- :mod:`~gluontrain.torch.parallel` -- ``get_devices`` from ``--gpus`` and gluon's
  ``split_data`` / ``split_and_load``;
- :mod:`~gluontrain.torch.distributed` -- ``torchrun`` + ``DistributedDataParallel`` helpers
  (``init_distributed``, ``wrap_ddp``, ``convert_sync_batchnorm``, ``all_reduce_mean``, ...),
  ``TorchComm`` (the engine's ``Comm`` over ``torch.distributed``) and ``ShardSampler``;
- :mod:`~gluontrain.torch.step` -- ``LossDictStep``, the training step of every model that
  returns a loss dict (loss weights, clipping, AMP scaler, losses averaged over ranks),
  ``to_device`` and ``seed_all``;
- :mod:`~gluontrain.torch.ops` -- generic detection ops (IoU, box coder, NMS, ROI features,
  anchors, matching, losses); :mod:`~gluontrain.torch.data` -- VOC / COCO datasets;
- :mod:`~gluontrain.torch.checkpoint` -- full checkpoints in the core format with torch's RNG
  state (``save_checkpoint`` / ``restore_checkpoint``) and weights-only ``load_weights``.

See docs/torch_idioms.md for the Gluon idiom -> gluontrain.torch table.
"""
