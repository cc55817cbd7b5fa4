"""The detector assembled from the configuration, as seamseg's ``make_model``: the seamseg
flavour of :mod:`gluontrain.torch.twostage` (``seamseg.DetectionNet``) built from ``[body]``,
``[fpn]``, ``[rpn]`` and ``[roi]``.
"""
from ..backbone import freeze_stages, load_body_weights
from ..twostage import algos
from ..twostage.box_head import FPNROIHead
from ..twostage.fpn import FPN, FPNBody
from ..twostage.norm import norm_act_from_config
from ..twostage.rpn import RPNHead
from ..twostage.seamseg import DetectionNet
from .body import make_body

__all__ = ['make_model', 'NETWORK_INPUTS', 'LOSS_NAMES']

NETWORK_INPUTS = ('img', 'cat', 'iscrowd', 'bbx')
#: The losses ``DetectionNet`` returns, in seamseg's order (that of ``[optimizer] loss_weights``).
LOSS_NAMES = ('obj_loss', 'bbx_loss', 'roi_cls_loss', 'roi_bbx_loss')


def make_model(config, num_thing, num_stuff=0):
    """seamseg's ``make_model`` up to the networks (``[body]``, ``[fpn]``, ``[rpn]``,
    ``[roi]``): body (+ ``weights``), freezing, FPN, RPN head, FPN ROI head.

    Parameters
    ----------
    config : configparser.ConfigParser
    num_thing, num_stuff : int

    Returns
    -------
    DetectionNet

    Raises
    ------
    ValueError
        Unknown body or normalization mode, or ``[body] out_channels`` that disagrees with
        the body's real channels (seamseg would fail later with a shape error).
    """
    body_config, fpn_config = config['body'], config['fpn']
    rpn_config, roi_config = config['rpn'], config['roi']
    classes = {'total': num_thing + num_stuff, 'stuff': num_stuff, 'thing': num_thing}
    norm_static, norm_dynamic = norm_act_from_config(body_config)

    body_params = body_config.getstruct('body_params') if body_config.get('body_params') else {}
    body = make_body(body_config['body'], norm_act=norm_static, **body_params)
    if body_config.get('weights'):
        load_body_weights(body, body_config['weights'])
    # seamseg's num_frozen: parameters of mod1..mod<n>; the norms keep their mode, so in
    # bn/syncbn modes they still normalise with batch statistics (docs/faithfulness.md)
    freeze_stages(body, body_config.getint('num_frozen'))

    body_channels = body_config.getstruct('out_channels')
    fpn_inputs = fpn_config.getstruct('inputs')
    wrong = {k: (body_channels.get(k), body.out_channels[k]) for k in fpn_inputs
             if body_channels.get(k) != body.out_channels.get(k)}
    if wrong:
        raise ValueError('[body] out_channels disagrees with the {} body ({} as (config, real)); '
                         'set out_channels = {}'.format(body_config['body'], wrong,
                                                        dict(body.out_channels)))
    fpn = FPN([body_channels[name] for name in fpn_inputs], fpn_config.getint('out_channels'),
              fpn_config.getint('extra_scales'), norm_static, fpn_config['interpolation'])
    body = FPNBody(body, fpn, fpn_inputs)

    # seamseg passes a literal stride 1 here ([rpn] stride is not read).
    rpn_head = RPNHead(fpn_config.getint('out_channels'),
                       len(rpn_config.getstruct('anchor_ratios')), 1,
                       rpn_config.getint('hidden_channels'), norm_dynamic)
    roi_head = FPNROIHead(fpn_config.getint('out_channels'), classes,
                          roi_config.getstruct('roi_size'), norm_act=norm_dynamic)
    return DetectionNet(body, rpn_head, roi_head, classes,
                        (rpn_config.getint('fpn_min_level'), rpn_config.getint('fpn_levels')),
                        algos.RPNSettings.from_config(rpn_config, fpn_config),
                        algos.ROISettings.from_config(roi_config))
