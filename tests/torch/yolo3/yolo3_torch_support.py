"""The fixture weights of make_yolo3_torch_fixtures.py for a torch YOLOv3, and its ImageNet
bases' weights files (shared by the model, weights and recipe tests)."""
from fixtures.make_yolo3_torch_fixtures import base_weights_for, weights_for
from gluontrain.yolo3.layout import base_mapping
from gluontrain.torch.yolo3.model import get_yolov3
from gluontrain.torch.yolo3.weights import gluon_names

#: input channels of each ImageNet classifier's 1000-class ``output`` (its last stage's width)
CLASSIFIER_IN = {'darknet53': 1024, 'mobilenet1.0': 1024, 'mobilenet0.25': 256}


def fill_arrays(model):
    """``{save_parameters name: array}`` of the fixture weights for ``model`` (its anchors and
    offsets are its own)."""
    state = model.state_dict()
    names = gluon_names(model)
    shapes = {names[k]: tuple(v.shape) for k, v in state.items() if names[k] is not None}
    constants = {names[k]: v.numpy() for k, v in state.items()
                 if names[k] is not None and names[k].endswith(('.anchors', '.offsets'))}
    return weights_for(shapes, constants)


def base_arrays(network):
    """The base fixture's weights (``base_<network>.npz``), ``{name: array}`` in gluoncv's
    ``save_parameters`` order: the stage tensors under their ``features.N`` names (a torch
    YOLOv3 gives the names and shapes), then the classifier."""
    model = get_yolov3('yolo3_{}_voc'.format(network))
    names, state = gluon_names(model), model.state_dict()
    to_base = base_mapping([n for n in names.values() if n], [len(s) for s in model.stages])
    shapes = {to_base[n]: tuple(state[k].shape) for k, n in names.items() if n in to_base}
    shapes.update({'output.weight': (1000, CLASSIFIER_IN[network]), 'output.bias': (1000,)})
    return base_weights_for(network, shapes)
