"""The ResNet / ResNeXt body shared by the torch recipes (two-stage and scene-graph), under
seamseg's or maskrcnn-benchmark's parameter names (:data:`LAYOUTS`), and the conversions
between the references' key layouts."""
from .convert import body_key_scheme, load_body_weights, rename_body_keys
from .norms import FrozenBatchNorm2d, group_norm_channels, make_group_norm
from .resnet import (ARCHITECTURES, LAYOUTS, NAMINGS, BodyLayout, ResidualBlock, ResNet, Stem,
                     freeze_stages, make_resnet)

__all__ = ['ARCHITECTURES', 'LAYOUTS', 'NAMINGS', 'BodyLayout', 'ResidualBlock', 'ResNet',
           'Stem', 'freeze_stages', 'make_resnet', 'FrozenBatchNorm2d', 'group_norm_channels',
           'make_group_norm', 'body_key_scheme', 'rename_body_keys', 'load_body_weights']
