"""The two-stage detector (FPN Faster R-CNN) in plain PyTorch, in two flavours built from one
set of parts:

- :mod:`.fpn` -- :class:`~.fpn.FPN` (``top_block`` ``'convs'`` or ``'max_pool'``) and the
  body + FPN wrapper;
- :mod:`.rpn` -- the shared :class:`~.rpn.RPNHead` and maskrcnn-benchmark's RPN module;
- :mod:`.box_head` / :mod:`.box_inference` -- the ROI box head, its sampler, loss, box coder
  and post-processor;
- :mod:`.images` -- the padded image batch; :mod:`.structures` -- maskrcnn-benchmark's
  ``BoxList``; :mod:`.norm` -- seamseg's norm + activation layers;
- anchors and matching from :mod:`gluontrain.torch.ops` (``layout`` / ``plus_one`` flags).

The flavours keep their reference's parameter names (data: :mod:`.flavours`, as the shared
body's :data:`gluontrain.torch.backbone.resnet.LAYOUTS`) and numbers (behaviour arguments of
the constructors):

- :mod:`.seamseg` -- seamseg's ``DetectionNet`` with :mod:`.algos` (used by the ``frcnn``
  recipe);
- :mod:`.maskrcnn` -- maskrcnn-benchmark's ``GeneralizedRCNN`` as Scene-Graph-Benchmark
  configures it (used by the ``sgg`` recipes, which read their config into it in
  :mod:`gluontrain.torch.sgg.modeling.detector`).

Import the module you need; this package imports nothing at load time.
"""
