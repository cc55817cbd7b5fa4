"""Building the YOLOv3 network (and the SyncBN ``async_net``) as the reference does."""
import os
import warnings

from mxnet import gluon

from gluoncv.model_zoo import get_model
from gluoncv.model_zoo import model_store

# the ImageNet base each YOLOv3 variant asks gluoncv's model store for
BASE_NETS = {'darknet53': 'darknet53', 'mobilenet1.0': 'mobilenet1.0',
             'mobilenet0.25': 'mobilenet0.25'}


def net_name(args):
    """``yolo3_<network>_<voc|coco|custom>``; custom and synthetic data use the custom nets."""
    suffix = {'synthetic': 'custom'}.get(args.dataset.lower(), args.dataset.lower())
    return '_'.join(('yolo3', args.network, suffix))


def pretrained_base_path(network):
    """Where gluoncv looks for the ImageNet weights of ``network``'s base (may not exist)."""
    base = BASE_NETS[network]
    root = os.path.join(os.environ['MXNET_HOME'], 'models') if 'MXNET_HOME' in os.environ \
        else os.path.join('~', '.mxnet', 'models')
    return os.path.join(os.path.expanduser(root),
                        '{}-{}.params'.format(base, model_store.short_hash(base)))


def _check_pretrained_base(network):
    path = pretrained_base_path(network)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            'The ImageNet-pretrained base for --network {} is not on this machine and cannot be '
            'downloaded offline. Put the file at {} (gluoncv model store; $MXNET_HOME/models '
            'if MXNET_HOME is set), or pass --no-pretrained-base to start from random weights.'
            .format(network, path))


def get_net(args, ctx):
    """The training network and the network the data workers use for target generation.

    With ``--syncbn`` and several contexts the training net uses
    ``gluon.contrib.nn.SyncBatchNorm(num_devices=len(ctx))`` and a second, plain-BatchNorm
    ``async_net`` feeds the train transforms (SyncBatchNorm cannot run in a worker);
    otherwise both are the same object. Parameters are initialised, not loaded: ``train``
    loads ``--resume``/``--load-weights``.

    Parameters
    ----------
    args : argparse.Namespace
        Uses ``network``, ``dataset``, ``classes``, ``syncbn``, ``no_pretrained_base``.
    ctx : list of mx.Context

    Returns
    -------
    (net, async_net)
    """
    name = net_name(args)
    pretrained_base = not getattr(args, 'no_pretrained_base', False)
    if pretrained_base:
        _check_pretrained_base(args.network)
    kwargs = {}
    if name.endswith('_custom'):
        kwargs['classes'] = [c for c in args.classes.split(',') if c]
    if args.syncbn and len(ctx) > 1:
        net = get_model(name, pretrained_base=pretrained_base,
                        norm_layer=gluon.contrib.nn.SyncBatchNorm,
                        norm_kwargs={'num_devices': len(ctx)}, **kwargs)
        async_net = get_model(name, pretrained_base=False, **kwargs)  # used by cpu worker
    else:
        net = get_model(name, pretrained_base=pretrained_base, **kwargs)
        async_net = net
    with warnings.catch_warnings(record=True):
        # pretrained base layers warn that they are initialised already
        warnings.simplefilter('always')
        net.initialize()
        async_net.initialize()
    return net, async_net
