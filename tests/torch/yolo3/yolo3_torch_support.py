"""The fixture weights of make_yolo3_torch_fixtures.py for a torch YOLOv3 (shared by the
model and weights tests)."""
from fixtures.make_yolo3_torch_fixtures import weights_for
from gluontrain.torch.yolo3.weights import gluon_names


def fill_arrays(model):
    """``{save_parameters name: array}`` of the fixture weights for ``model`` (its anchors and
    offsets are its own)."""
    state = model.state_dict()
    names = gluon_names(model)
    shapes = {names[k]: tuple(v.shape) for k, v in state.items() if names[k] is not None}
    constants = {names[k]: v.numpy() for k, v in state.items()
                 if names[k] is not None and names[k].endswith(('.anchors', '.offsets'))}
    return weights_for(shapes, constants)
