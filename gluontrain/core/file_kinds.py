"""What a weights or checkpoint file is, read from its first bytes (never its suffix), and which
YOLOv3 backend wrote a checkpoint: the dispatch every loader starts with."""
import os

__all__ = ['CHECKPOINT', 'MX_PARAMS', 'TORCH_WEIGHTS', 'MX_MAGIC', 'file_kind',
           'checkpoint_writer', 'refuse_other_writer']

CHECKPOINT, MX_PARAMS, TORCH_WEIGHTS = 'checkpoint', 'mxnet-params', 'torch-weights'
# NDArray::Save's list magic (kMXAPINDArrayListMagic = 0x112), little-endian uint64
MX_MAGIC = (0x112).to_bytes(8, 'little')


def file_kind(path):
    """What a weights or checkpoint file is, decided by its content (never its suffix).

    Returns
    -------
    str
        :data:`CHECKPOINT` (a gluontrain checkpoint), :data:`MX_PARAMS` (an MXNet
        ``save_parameters`` / ``nd.save`` file) or :data:`TORCH_WEIGHTS` (a ``torch.save``
        zip archive).

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    ValueError
        For anything else, naming the file.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError('{} does not exist; pass a {{prefix}}_last.ckpt checkpoint or '
                                'a weights file'.format(path))
    with open(path, 'rb') as f:
        head = f.read(8)
    if head == MX_MAGIC:
        return MX_PARAMS
    if head[:4] == b'PK\x03\x04':
        return TORCH_WEIGHTS
    if head[:1] == b'\x80':  # a pickle (protocol 2+): load_checkpoint checks it is ours
        return CHECKPOINT
    raise ValueError('{} is neither a gluontrain checkpoint nor an MXNet or PyTorch weights '
                     'file'.format(path))


#: the framework of a checkpoint's weights blob, by its first bytes, and how to resume it
_WRITERS = {'mxnet': ('the MXNet backend', 'MXNet .params'),
            'torch': ('the PyTorch backend', 'a torch.save archive')}


def checkpoint_writer(payload):
    """Which backend wrote a checkpoint (:func:`load_checkpoint`'s payload), read from its
    weights blob: ``'mxnet'`` (MXNet ``.params`` bytes), ``'torch'`` (a ``torch.save`` zip)
    or ``None``."""
    head = bytes(memoryview(payload.get('params') or b'')[:8])
    if head == MX_MAGIC:
        return 'mxnet'
    if head[:4] == b'PK\x03\x04':
        return 'torch'
    return None


def refuse_other_writer(payload, path, backend, argument='--resume'):
    """Refuse, before any of its blobs is decoded, a checkpoint that the other backend wrote.

    Parameters
    ----------
    payload : dict
        :func:`load_checkpoint`'s.
    path : str
    backend : {'mxnet', 'torch'}
        The backend reading it.
    argument : str
        Named in the message.

    Raises
    ------
    ValueError
        ``--resume PATH is a checkpoint of the PyTorch backend (...)``, with both ways on:
        the writer's ``--backend``, or its weights with ``--load-weights``.
    """
    writer = checkpoint_writer(payload)
    if writer is None or writer == backend:
        return
    who, what = _WRITERS[writer]
    raise ValueError('{} {} is a checkpoint of {} (its weights are {}), which --backend {} '
                     'cannot resume; resume it with --backend {}, or start from its weights: '
                     'the {{prefix}}_best.params or {{prefix}}_NNNN_*.params files of that run '
                     'load on either backend with --load-weights'.format(
                         argument, path, who, what, backend, writer))
