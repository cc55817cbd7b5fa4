"""What a weights file filled in a model: detectron2-style load reports, for every backend
(docs/checkpoints.md).

:func:`compare` gives a :class:`LoadReport`; :func:`check` turns one that loaded nothing or,
unless partial loads are allowed, left tensors unfilled into one :class:`WeightsLoadError` line.
Backend-neutral: keys are strings, shapes tuples of int (numpy only).
"""
import re
import warnings

__all__ = ['WeightsLoadError', 'LoadReport', 'group_keys', 'compare', 'guess_origin', 'check',
           'warn_nonfinite', 'matches_ignore']

# how many grouped keys a one-line error shows before "..."
_ERROR_GROUPS = 4


class WeightsLoadError(ValueError):
    """One-line, user-facing error of a weights file that does not fit (CLIs print it as
    ``error: ...``)."""


def _shape(shape):
    return None if shape is None else tuple(int(s) for s in shape)


def _fmt_shape(shape):
    return 'no tensor' if shape is None else str(tuple(shape))


def group_keys(keys):
    """Sorted keys, those sharing a prefix in one string as detectron2's checkpointer logs them:
    ``['a.b.bias', 'a.b.weight', 'c']`` gives ``['a.b.{bias, weight}', 'c']``."""
    # detectron2's grouping: the prefix is everything up to the last '.'
    groups = {}
    for key in keys:
        head, dot, tail = key.rpartition('.')
        groups.setdefault(head if dot else key, []).extend([tail] if dot else [])
    return sorted(head + ('' if not tails else '.' + tails[0] if len(tails) == 1
                          else '.{' + ', '.join(sorted(tails)) + '}')
                  for head, tails in groups.items())


def matches_ignore(key, ignore):
    """Whether :func:`compare` should not expect ``key`` in the file: ``ignore`` is a predicate,
    or suffixes (``s`` matches ``s`` and ``*.s``: ``num_batches_tracked`` matches
    ``bn1.num_batches_tracked``)."""
    if callable(ignore):
        return bool(ignore(key))
    return any(key == s or key.endswith('.' + s) for s in ignore)


def _kind(key):
    parts = key.split('.')
    return parts[-2] if parts[-1].isdigit() and len(parts) > 1 else parts[-1]


class LoadReport:
    """What one load filled, from a file into a model (or one module of it).

    Attributes
    ----------
    source : str
        The file, as the user gave it.
    total : int
        Target tensors expected from the file (``ignored`` excepted):
        ``len(loaded) + len(missing) + len(mismatched)``.
    loaded, missing : list of str
        Target keys filled; target keys the file has no tensor for.
    unexpected : list of str
        File keys no target key uses.
    mismatched : list of (str, tuple, tuple)
        ``(target key, target shape, file shape)`` not loaded for their shape.
    ignored : list of str
        Target keys not expected and absent (e.g. ``num_batches_tracked``, which InPlaceABN
        and old checkpoints lack); an ignored key the file has is loaded as any other.
    file_keys : list of str
        Every key of the file (for :func:`guess_origin`).
    mapping : dict
        ``{target key: file key}`` where they differ.
    """

    def __init__(self, source, total, loaded, missing, unexpected, mismatched, ignored=(),
                 file_keys=(), mapping=None):
        self.source = str(source)
        self.total = int(total)
        self.loaded = list(loaded)
        self.missing = list(missing)
        self.unexpected = list(unexpected)
        self.mismatched = list(mismatched)
        self.ignored = list(ignored)
        self.file_keys = list(file_keys)
        self.mapping = dict(mapping or {})

    @property
    def complete(self):
        """True when every expected target tensor was loaded (unexpected keys aside)."""
        return not self.missing and not self.mismatched

    def summary(self):
        """One line: ``loaded 312 of 314 tensors from FILE (2 missing, 0 unexpected, 0 wrong
        shape)``, plus ``; N ignored (...)`` when target keys were not expected."""
        line = 'loaded {} of {} tensors from {} ({})'.format(
            len(self.loaded), self.total, self.source, self._counts())
        if self.ignored:
            # the buffer's kind: 'running_var', or 'cell_anchors' for 'cell_anchors.0'
            suffixes = sorted({_kind(k) for k in self.ignored})
            line += '; {} not expected in the file ({})'.format(len(self.ignored),
                                                                  ', '.join(suffixes))
        return line

    def _counts(self):
        return '{} missing, {} unexpected, {} wrong shape'.format(
            len(self.missing), len(self.unexpected), len(self.mismatched))

    def mismatch_lines(self):
        """detectron2's warning for every tensor skipped for its shape."""
        return ["Skip loading parameter '{}' to the model due to incompatible shapes: {} in "
                "the checkpoint but {} in the model!".format(
                    key, _fmt_shape(file_shape), _fmt_shape(target_shape))
                for key, target_shape, file_shape in self.mismatched]

    def format(self):
        """The summary and detectron2-style blocks of what did not load (multi-line)."""
        lines = [self.summary()]
        lines += self.mismatch_lines()
        if self.missing:
            lines.append('Some model parameters or buffers are not found in the checkpoint:')
            lines += ['  ' + g for g in group_keys(self.missing)]
        if self.unexpected:
            lines.append('The checkpoint contains parameters not used by the model:')
            lines += ['  ' + g for g in group_keys(self.unexpected)]
        return '\n'.join(lines)

    def __repr__(self):
        return '<LoadReport {}>'.format(self.summary())


def compare(target_shapes, file_shapes, source, mapping=None, ignore=()):
    """The :class:`LoadReport` of matching a target's tensors with a file's, by name and shape.

    ``target_shapes`` / ``file_shapes``: ``{key: shape}`` (a file shape ``None``, no tensor,
    never matches); ``mapping``: ``{target key: file key}`` where names differ (``None``: no
    source); target keys matching ``ignore`` (:func:`matches_ignore`) that the file lacks are
    ``ignored``, not ``missing``.
    """
    mapping = dict(mapping or {})
    file_shapes = {k: _shape(v) for k, v in file_shapes.items()}
    loaded, missing, mismatched, ignored, used = [], [], [], [], set()
    for key, shape in target_shapes.items():
        shape = _shape(shape)
        file_key = mapping.get(key, key)
        if file_key is None or file_key not in file_shapes:
            (ignored if matches_ignore(key, ignore) else missing).append(key)
            continue
        used.add(file_key)
        if file_shapes[file_key] == shape:
            loaded.append(key)
        else:
            mismatched.append((key, shape, file_shapes[file_key]))
    unexpected = [k for k in file_shapes if k not in used]
    return LoadReport(source, len(target_shapes) - len(ignored), loaded, missing, unexpected,
                      mismatched, ignored, list(file_shapes),
                      {k: v for k, v in mapping.items() if k != v})


def _strip_prefix(keys, prefix):
    if keys and all(k.startswith(prefix) for k in keys):
        return [k[len(prefix):] for k in keys]
    return keys


# (what it looks like, test on the set of keys with a DDP 'module.' prefix stripped), first
# match wins: the most specific layouts first
def _has(keys, *patterns):
    return any(re.search(p, k) for k in keys for p in patterns)


_ORIGINS = (
    # seamseg's snapshot modules: body (FPNBody: backbone.mod1... and fpn.), rpn_head, roi_head
    ('a seamseg / gluontrain two-stage (frcnn) snapshot',
     lambda ks: _has(ks, r'^(body\.)?backbone\.mod\d\.', r'^(rpn_head|roi_head)\.')),
    ('a seamseg ResNet body (mod1 ... mod5)',
     lambda ks: _has(ks, r'^mod[1-5]\.')),
    ('a Scene-Graph-Benchmark relation model',
     lambda ks: _has(ks, r'^(model\.)?roi_heads\.relation\.')),
    ('a Scene-Graph-Benchmark / maskrcnn-benchmark model',
     lambda ks: _has(ks, r'^(model\.)?backbone\.body\.(stem|layer\d)\.',
                     r'^(model\.)?rpn\.head\.', r'^(model\.)?roi_heads\.box\.')),
    ('a Detectron (Caffe2) ResNet .pkl', lambda ks: _has(ks, r'^res\d_\d+_branch', r'^conv1_w$')),
    ('an ssd.pytorch SSD300 state_dict',
     lambda ks: _has(ks, r'^vgg\.\d+\.') and _has(ks, r'^(loc|conf)\.\d+\.')),
    ('a VGG16 base (vgg16_reducedfc.pth)',
     lambda ks: all(re.match(r'^\d+\.(weight|bias)$', k) for k in ks)),
    ('a GluonCV YOLOv3 .params',
     lambda ks: _has(ks, r'(^|\.)yolo_(outputs|blocks)\.', r'^yolov3\d*_', r'transitions\.\d')),
    ('a GluonCV / MXNet .params', lambda ks: _has(ks, r'_(weight|bias|gamma|beta|running_mean)$')
     and not _has(ks, r'\.')),
    ('a torchvision ResNet', lambda ks: _has(ks, r'^layer[1-4]\.\d+\.conv\d\.')
     and _has(ks, r'^conv1\.weight$')),
    ('a torchvision VGG', lambda ks: _has(ks, r'^features\.\d+\.weight$')
     and _has(ks, r'^classifier\.\d+\.')),
    ('a gluontrain checkpoint', lambda ks: {'params', 'trainer', 'epoch'} <= set(ks)),
    ('a seamseg / gluontrain two-stage (frcnn) snapshot (config, state_dict, training_meta)',
     lambda ks: {'state_dict', 'training_meta'} <= set(ks)),
    ('a Scene-Graph-Benchmark / maskrcnn-benchmark checkpoint (model, optimizer, ...)',
     lambda ks: 'model' in ks and bool({'optimizer', 'scheduler', 'iteration'} & set(ks))),
)


def guess_origin(keys):
    """What a file's keys look like (e.g. ``'an ssd.pytorch SSD300 state_dict'``) for error
    messages, ignoring a DDP ``module.`` prefix; ``None`` for no known layout."""
    keys = _strip_prefix([str(k) for k in keys], 'module.')
    if not keys:
        return None
    for origin, test in _ORIGINS:
        if test(keys):
            return origin
    return None


def _preview(keys, limit=_ERROR_GROUPS):
    groups = group_keys(keys)
    shown = ', '.join(groups[:limit])
    return shown + (', ...' if len(groups) > limit else '')


def warn_nonfinite(arrays, keys, what, source):
    """Warn in one line when loaded tensors hold NaN or inf (a run from them stops at once
    with a message about the learning rate: the NaN guard cannot tell the two apart); return
    those keys. ``arrays``: ``{key: array}``; ``what``, ``source``: argument and file."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    bad = [k for k in keys if k in arrays and arrays[k] is not None
           and np.issubdtype(np.asarray(arrays[k]).dtype, np.floating)
           and not np.isfinite(np.asarray(arrays[k])).all()]
    if bad:
        warnings.warn('{} {}: {} of the loaded tensors hold NaN or inf ({}); outputs and any '
                      'training from them are not finite: use the weights of an earlier, good '
                      'epoch'.format(what, source, len(bad), _preview(bad)), stacklevel=2)
    return bad


def check(report, what, fix, allow_partial=False, allow_unexpected=True):
    """Refuse a load that filled nothing or, unless ``allow_partial``, not everything; return
    ``report`` when accepted.

    Parameters
    ----------
    what : str
        What the file was given as (``'--resume'``); starts the message.
    fix : str
        What the user should do instead; ends the message.
    allow_partial : bool, default False
        Accept missing and wrong-shape tensors (a load of zero tensors is refused anyway).
    allow_unexpected : bool, default True
        Accept unused file tensors; ``False`` is ``load_state_dict(strict=True)``'s rule.

    Raises
    ------
    WeightsLoadError
        One line: the file, the counts, what it looks like (zero loaded) or the first unfilled
        keys, and ``fix``.
    """
    if report.total and not report.loaded:
        origin = guess_origin(report.file_keys)
        if report.mismatched:
            key, target_shape, file_shape = report.mismatched[0]
            looks = ("every tensor it shares with the model has another shape ('{}': {} in the "
                     "file, {} in the model)".format(key, _fmt_shape(file_shape),
                                                     _fmt_shape(target_shape)))
        elif origin:
            looks = 'it looks like {}'.format(origin)
        elif report.file_keys:
            looks = 'none of its keys ({}) is a key of the model ({})'.format(
                _preview(report.file_keys, 2), _preview(report.missing, 2))
        else:
            looks = 'it holds no tensors'
        raise WeightsLoadError('{} {}: loaded 0 of {} tensors; {}; {}'.format(
            what, report.source, report.total, looks, fix))
    refuse_unexpected = not allow_unexpected and report.unexpected
    if (not allow_partial and not report.complete) or refuse_unexpected:
        parts = []
        if report.missing:
            parts.append('missing {}'.format(_preview(report.missing)))
        if report.mismatched:
            key, target_shape, file_shape = report.mismatched[0]
            parts.append("wrong shape '{}' ({} in the file, {} in the model){}".format(
                key, _fmt_shape(file_shape), _fmt_shape(target_shape),
                ' and {} more'.format(len(report.mismatched) - 1)
                if len(report.mismatched) > 1 else ''))
        if refuse_unexpected:
            parts.append('unexpected {}'.format(_preview(report.unexpected)))
        raise WeightsLoadError('{} {}: loaded {} of {} tensors ({}); {}; {}'.format(
            what, report.source, len(report.loaded), report.total, report._counts(),
            '; '.join(parts), fix))
    return report
