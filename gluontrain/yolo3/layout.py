"""What a GluonCV YOLOv3 ``.params`` layout is, from its names and shapes alone (numpy only).

Shared by the MXNet and the PyTorch YOLOv3 loaders, which both name a file that does not fit
("it looks like a GluonCV YOLOv3 darknet53 with 80 classes") instead of listing keys.
Names are ``save_parameters``' (``stages.0.0.weight``, ``yolo_outputs.0.prediction.bias``).
Also shared: where a YOLOv3's stages sit in its ImageNet base (:func:`base_mapping`) and how
the base file is found and reported (:func:`find_pretrained_base`, :func:`pretrained_base_lines`).
"""
from ..core import model_store
from ..core.load_report import WeightsLoadError

__all__ = ['MOBILENET_WIDTHS', 'ZOO_DATASETS', 'describe', 'describe_text',
           'check_same_network', 'base_mapping', 'find_pretrained_base',
           'pretrained_base_lines']

#: first convolution's output channels -> GluonCV's mobilenet multiplier
MOBILENET_WIDTHS = {32: '1.0', 24: '0.75', 16: '0.5', 8: '0.25'}
#: class count -> the zoo dataset of that many classes
ZOO_DATASETS = {20: 'voc', 80: 'coco'}


def _base_network(shapes, prefix):
    first = shapes.get(prefix + '0.0.weight')
    if first is not None and len(first) == 4 and first[1] == 3:
        return 'darknet53'
    first = shapes.get(prefix + '0.weight')
    if first is not None and len(first) == 4 and first[1] == 3:
        width = MOBILENET_WIDTHS.get(first[0])
        return 'mobilenet' + width if width else None
    return None


def describe(shapes):
    """What a ``{key: shape}`` set is: ``(base, classes)`` of a GluonCV YOLOv3, ``(base,
    None)`` of a GluonCV ImageNet classifier (``features.*``, ``output.*``), else ``None``.

    Parameters
    ----------
    shapes : dict

    Returns
    -------
    tuple or None
        E.g. ``('darknet53', 20)``; ``base`` is ``None`` when unknown.
    """
    pred = shapes.get('yolo_outputs.0.prediction.bias')
    if pred is not None and len(pred) == 1 and pred[0] % 3 == 0:
        return _base_network(shapes, 'stages.0.'), pred[0] // 3 - 5
    if 'output.weight' in shapes:
        base = _base_network(shapes, 'features.')
        if base:
            return base, None
    return None


def describe_text(found, origin='GluonCV '):
    """Words for a :func:`describe` result: ``'a GluonCV YOLOv3 darknet53 with 20 classes (as
    yolo3_darknet53_voc)'`` or ``'a GluonCV mobilenet1.0 ImageNet classifier (...)'``.

    Parameters
    ----------
    found : tuple
        ``(base, classes)``.
    origin : str
        Prefix of the kind (``''`` for the network being loaded).

    Returns
    -------
    str
    """
    base, classes = found
    if classes is None:
        return ('a {}{} ImageNet classifier (features.*, output.*: the base a YOLOv3 starts '
                'from, not a detector)'.format(origin, base))
    name = 'yolo3_{}_{}'.format(base or '?', ZOO_DATASETS.get(classes, 'custom'))
    return 'a {}YOLOv3 {} with {} classes (as {})'.format(origin, base or 'of unknown base',
                                                         classes, name)


def check_same_network(report, what, fix, file_shapes, own_shapes, counts, ignore_extra=False):
    """Refuse in one line a file holding another network's weights: when the load does not fit
    (a tensor missing or of another shape, or unexpected ones not ignored) and the file and
    this network (``file_shapes``, ``own_shapes()``: ``{name: shape}``) are GluonCV layouts
    of different kinds, the :class:`~gluontrain.core.load_report.WeightsLoadError` says
    ``what``, the report's source and ``counts``, what each one is, the ``--network`` /
    ``--dataset`` (or class count) the file fits, and ``fix``."""
    if report.complete and (ignore_extra or not report.unexpected):
        return
    found, own = describe(file_shapes), describe(own_shapes())
    # a known network of another kind; an unknown base is just a file that does not fit
    if not (found and found[0] and own and found != own):
        return
    base, classes = found
    hint = ''
    if base and classes is not None:
        hint = ' (it fits --network {}{})'.format(
            base, ' --dataset ' + ZOO_DATASETS[classes] if classes in ZOO_DATASETS
            else ' with {} classes'.format(classes))
    raise WeightsLoadError(
        '{} {} holds the weights of another network: {}; it looks like {} but this is {}{}; '
        '{}'.format(what, report.source, counts, describe_text(found),
                    describe_text(own, origin=''), hint, fix))


# ------------------------------------------------------------------ the ImageNet base
def base_mapping(keys, stage_lengths):
    """``{stage key: base key}`` for the ``stages.*`` names among ``keys``.

    GluonCV builds a YOLOv3 from slices of its ImageNet base's ``features`` (darknet53
    ``[:15] / [15:24] / [24:]``, mobilenet ``[:33] / [33:69] / [69:-2]``) and the stages hold
    those very layers, so layer ``k`` of stage ``i`` is ``features.{k + len(earlier stages)}``:
    ``stages.1.0.body.0.1.gamma`` of darknet53 is ``features.15.body.0.1.gamma``.

    Parameters
    ----------
    keys : iterable of str
        ``save_parameters`` names (other than ``stages.*`` ones are skipped).
    stage_lengths : sequence of int
        The number of layers of each stage.

    Returns
    -------
    dict
    """
    offsets = [sum(stage_lengths[:i]) for i in range(len(stage_lengths))]
    mapping = {}
    for key in keys:
        parts = key.split('.', 3)
        if len(parts) == 4 and parts[0] == 'stages':
            layer = int(parts[2]) + offsets[int(parts[1])]
            mapping[key] = 'features.{}.{}'.format(layer, parts[3])
    return mapping


def find_pretrained_base(network, path=''):
    """The model store's ImageNet ``network`` file (gluoncv's ``pretrained_base=True``):
    found under ``$MXNET_HOME/models``, or downloaded as gluoncv downloads it; or ``path``
    (``--pretrained-base FILE``) when given.

    Returns
    -------
    (str, str, str)
        The path, and the ``what`` and ``fix`` of the load's messages.

    Raises
    ------
    ValueError
        One line: not on this machine and not downloadable, where to put it, or
        ``--no-pretrained-base``.
    """
    if path:
        return (path, 'the --pretrained-base file for --network {}'.format(network),
                'give the base .params of --network {} (GluonCV\'s ImageNet layout), or pass '
                '--no-pretrained-base'.format(network))
    try:
        path = model_store.find_or_fetch(network)
    except ValueError as e:
        raise ValueError('The ImageNet-pretrained base for --network {} is not on this machine '
                         'and {}; or pass --no-pretrained-base to start from random weights'
                         .format(network, e)) from None
    fix = ("put GluonCV's ImageNet {} weights at {}, or pass --no-pretrained-base".format(
        network, path))
    return path, 'the pretrained base of --network {}'.format(network), fix


def pretrained_base_lines(report, path, network, given=False):
    """The training log's lines for a loaded base: ``pretrained base: `` and the report, and a
    note when the model store's file is not the released one (its SHA-1 differs; gluoncv would
    download the released file over it, here it is loaded as it is); none for a file the user
    ``given`` (``--pretrained-base``)."""
    lines = ['pretrained base: ' + report.format()]
    expected = model_store.SHA1.get(network)
    if not given and expected and model_store.sha1_of(path) != expected:
        lines.append('note: {} is not the model store\'s {} (its SHA-1 is not {}); gluoncv '
                     'would download the released file over it'.format(path, network, expected))
    return lines
