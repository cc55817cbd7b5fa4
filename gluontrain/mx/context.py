"""MXNet contexts from ``--gpus`` / ``--cpus``."""
import mxnet as mx

from ..core.devices import check_gpu_ids, parse_gpu_ids


def get_contexts(gpus='0', cpus=0):
    """The list of contexts a run trains on.

    Parameters
    ----------
    gpus : str
        GluonCV's ``--gpus`` (``'0,1,2,3'``, ``'0-7'``; ``''`` means CPU).
    cpus : int
        When > 0, train on ``[cpu(0), ..., cpu(cpus-1)]`` instead: several CPU contexts take the
        same multi-device path (``split_and_load``, kvstore ``local``) as several GPUs.

    Returns
    -------
    list of mx.Context

    Raises
    ------
    ValueError
        For a malformed ``--gpus``, or GPU ids this MXNet build cannot see.
    """
    if cpus and cpus > 0:
        return [mx.cpu(i) for i in range(cpus)]
    ids = parse_gpu_ids(gpus)
    if not ids:
        return [mx.cpu()]
    available = mx.context.num_gpus()
    check_gpu_ids(gpus, ids, available, 'MXNet',
                  ' (this is a CPU build of mxnet; the GPU build is the cu112 extra)'
                  if available == 0 else '')
    return [mx.gpu(i) for i in ids]


def is_cpu(ctx_list):
    """True when every context is a CPU context."""
    return all(c.device_type.startswith('cpu') for c in ctx_list)
