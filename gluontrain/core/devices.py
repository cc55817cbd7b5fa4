"""Parsing of ``--gpus`` strings, shared by the MXNet and PyTorch backends, and the name of the
processor a recorded file was made on."""
import platform


def parse_gpu_ids(gpus):
    """Turn a ``--gpus`` string into a list of GPU ids.

    GluonCV's scripts accept ``'0,1,2,3'`` and treat ``''`` as CPU. Ranges such as ``'0-7'``
    (used in GluonCV's model-zoo training commands) are accepted too.

    Parameters
    ----------
    gpus : str
        Comma-separated ids or ranges; empty or blank for CPU.

    Returns
    -------
    list of int
        GPU ids in the order given; empty means CPU.

    Raises
    ------
    ValueError
        For anything that is not a non-negative id or an ``a-b`` range, or repeated ids.
    """
    ids = []
    for part in (gpus or '').split(','):
        part = part.strip()
        if not part:
            continue
        try:
            if '-' in part:
                lo, hi = (int(x) for x in part.split('-', 1))
                if hi < lo:
                    raise ValueError
                ids.extend(range(lo, hi + 1))
            else:
                ids.append(int(part))
        except ValueError:
            raise ValueError("--gpus {!r}: {!r} is not a GPU id. Use comma-separated ids such as "
                             "'0,1,2,3' or a range '0-3'; use --gpus '' to train on the CPU."
                             .format(gpus, part)) from None
    if any(i < 0 for i in ids):
        raise ValueError("--gpus {!r}: GPU ids are non-negative".format(gpus))
    if len(set(ids)) != len(ids):
        raise ValueError("--gpus {!r} names a GPU twice".format(gpus))
    return ids


def check_gpu_ids(gpus, ids, available, framework, hint=''):
    """Raise when ``--gpus`` names GPUs the framework cannot see.

    Parameters
    ----------
    gpus : str
        The ``--gpus`` string, quoted in the message.
    ids : list of int
        What :func:`parse_gpu_ids` returned.
    available : int
        GPUs the framework sees (``mx.context.num_gpus()``, ``torch.cuda.device_count()``).
    framework : str
        Named in the message.
    hint : str
        Appended after the count, e.g. why the framework sees none.

    Raises
    ------
    ValueError
    """
    missing = [i for i in ids if i >= available]
    if missing:
        raise ValueError("--gpus {!r} asks for GPU {} but {} sees {} GPU(s){}. Pass --gpus '' "
                         "to train on the CPU (or --cpus N for N CPU contexts)."
                         .format(gpus, ','.join(map(str, missing)), framework, available, hint))


def processor_name(cpuinfo='/proc/cpuinfo'):
    """The CPU's model name (the first ``model name`` line of ``cpuinfo``), else
    ``platform.processor()`` or ``'unknown'``: what a recorded fixture or weights file says it
    was made on (its last bits depend on the kernels that processor picks; docs/testing.md)."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or 'unknown'
