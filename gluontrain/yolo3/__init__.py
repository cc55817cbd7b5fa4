"""What GluonCV's YOLOv3 recipe needs on either backend, in numpy: the argument parser
(:mod:`.args`), the vectorised target generator (:mod:`.targets`), the train / validation
transforms (:mod:`.transform`), GluonCV's VOC reading and batch order (:mod:`.data`), and the
eval / demo scripts' parsers and output (:mod:`.infer`).

:mod:`gluontrain.mx.yolo3` and :mod:`gluontrain.torch.yolo3` import these; nothing here
imports MXNet, GluonCV, PyTorch or a backend package (the scripts' ``--backend`` route is
:mod:`gluontrain.tool_route`, above both).
"""
