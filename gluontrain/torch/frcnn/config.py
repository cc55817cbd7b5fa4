"""seamseg's ``.ini`` configuration: a defaults file with every section and key, overridden
by the user's file.

seamseg reads ``[defaults, user]`` with one ``configparser`` call, so a misspelt key in the
user file is silently ignored and the default is used. Here the user file is checked first:
an unknown section or key is an error naming the file, the section and the key (and the
closest valid names).
"""
import ast
import configparser
import difflib
import io
import os
from functools import partial

from ...core.argtypes import path_problem

__all__ = ['DEFAULTS_FILE', 'load_config', 'config_to_string', 'ConfigError', 'SCHEMA',
           'check_values', 'check_training_config', 'MAX_IMAGE_SIDE']

DEFAULTS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs',
                             'defaults.ini')

_CONVERTERS = {'struct': ast.literal_eval}


class ConfigError(ValueError):
    """A configuration file is missing, unreadable or names an unknown section/key."""


def _parser():
    return configparser.ConfigParser(allow_no_value=True, converters=_CONVERTERS)


def _read(path, what):
    problem = path_problem(path)
    if problem:
        raise ConfigError('{} {} {}: pass the path of an .ini file (see {} for '
                          'every key and its default)'.format(what, path, problem, DEFAULTS_FILE))
    parser = _parser()
    try:
        with open(path, encoding='utf-8') as f:
            parser.read_file(f, source=path)
    except configparser.Error as exc:
        raise ConfigError('{} {} is not a valid .ini file: {}'.format(
            what, path, str(exc).replace('\n', ' '))) from None
    return parser


def _suggest(name, choices):
    close = difflib.get_close_matches(name, list(choices), n=3)
    return ' (did you mean {}?)'.format(', '.join(repr(c) for c in close)) if close else ''


def load_config(config_file, defaults_file=DEFAULTS_FILE):
    """Load ``defaults_file`` and override it with ``config_file``, as seamseg's
    ``load_config``, refusing sections and keys the defaults do not have.

    Parameters
    ----------
    config_file : str or None
        The user's ``.ini``; ``None`` gives the defaults alone.
    defaults_file : str
        The file that lists every section and key with its default.

    Returns
    -------
    configparser.ConfigParser
        With seamseg's ``getstruct`` converter (``ast.literal_eval``).

    Raises
    ------
    ConfigError
        A file is missing or malformed, ``config_file`` has a section or key that
        ``defaults_file`` lacks, or a value does not parse or is out of range
        (:func:`check_values`).
    """
    defaults = _read(defaults_file, 'Defaults file')
    user = None
    if config_file is not None:
        user = _read(config_file, 'Configuration file')
        for section in user.sections():
            if not defaults.has_section(section):
                raise ConfigError('Configuration file {}: unknown section [{}]{}; valid '
                                  'sections: {}'.format(config_file, section,
                                                        _suggest(section, defaults.sections()),
                                                        ', '.join(defaults.sections())))
            for key in user[section]:
                if key not in defaults[section]:
                    raise ConfigError('Configuration file {}: unknown key {!r} in section [{}]{}; '
                                      'the keys of [{}] are listed in {}'.format(
                                          config_file, key, section,
                                          _suggest(key, defaults[section]), section,
                                          defaults_file))
        if user.defaults():
            raise ConfigError('Configuration file {}: a [DEFAULT] section would apply its keys to '
                              'every section; put them in the section they belong to'
                              .format(config_file))
    config = _parser()
    config.read([defaults_file] + ([config_file] if config_file is not None else []),
                encoding='utf-8')
    check_values(config, config_file, defaults_file, user)
    return config


def config_to_string(config):
    """The configuration as ``.ini`` text (what seamseg stores in its snapshots).

    Parameters
    ----------
    config : configparser.ConfigParser

    Returns
    -------
    str
    """
    with io.StringIO() as sio:
        config.write(sio)
        return sio.getvalue()


# ----- value checks -------------------------------------------------------------------------
# Every key of defaults.ini is parsed and range-checked when the file is loaded, so a bad value
# is one line naming the file, the section, the key, the value and what is allowed, before a
# model is built (seamseg reads each value where it is used: a typo surfaced as a bare
# "could not convert string to float: 'abc'", a SyntaxError or a ZeroDivisionError mid-run).

#: The largest image side the resize keys accept: one 8192 x 8192 float image is already
#: 0.8 GB (seamseg's own settings are 1024 / 2048); far larger values ran out of memory.
MAX_IMAGE_SIDE = 8192


class _Bad(Exception):
    """A value that fails its check: ``args[0]`` says what is allowed."""


def _number(kind, lo=None, hi=None, note='', lo_open=False):
    def check(text):
        try:
            value = kind(text)
        except ValueError:
            raise _Bad('is not {}'.format('an integer' if kind is int else 'a number')) from None
        if kind is float and value != value or value in (float('inf'), float('-inf')):
            raise _Bad('is not a finite number')
        if (lo is not None and (value <= lo if lo_open else value < lo)) or \
                (hi is not None and value > hi):
            raise _Bad('is out of range')
        return value
    bounds = []
    if lo is not None:
        bounds.append('{} {}'.format('>' if lo_open else '>=', lo))
    if hi is not None:
        bounds.append('<= {}'.format(hi))
    check.allowed = '{} {}{}'.format('an integer' if kind is int else 'a number',
                                     ' and '.join(bounds), note).strip()
    return check


_int, _float = partial(_number, int), partial(_number, float)


_BOOLEANS = configparser.ConfigParser.BOOLEAN_STATES


def _bool():
    def check(text):
        if text.lower() not in _BOOLEANS:
            raise _Bad('is not a boolean')
        return _BOOLEANS[text.lower()]
    check.allowed = 'yes/no, true/false, on/off or 1/0'
    return check


def _choice(*names):
    def check(text):
        if text not in names:
            raise _Bad('is not one of the known values' + _suggest(text, names))
        return text
    check.allowed = 'one of ' + ', '.join(names)
    return check


def _text():
    def check(text):
        return text
    check.allowed = 'any text'
    return check


def _struct(shape, allowed):
    """``shape(value)`` is True for an acceptable literal (seamseg's ``getstruct``)."""
    def check(text):
        try:
            value = ast.literal_eval(text)
        except (SyntaxError, ValueError) as exc:
            raise _Bad('is not a Python literal ({})'.format(
                getattr(exc, 'msg', None) or str(exc).split('\n')[0])) from None
        if not shape(value):
            raise _Bad('has the wrong form')
        return value
    check.allowed = allowed
    return check


def _is_num(x, lo=None, lo_open=False):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and \
        abs(x) != float('inf') and (lo is None or (x > lo if lo_open else x >= lo))


def _seq(value, n=None, item=lambda x: True):
    return isinstance(value, (list, tuple)) and len(value) > 0 and \
        (n is None or len(value) == n) and all(item(x) for x in value)


def _mods(value, item):
    return isinstance(value, dict) and value and all(
        isinstance(k, str) and item(v) for k, v in value.items())


def _pos_int(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


_RATIO = _float(0, 1)
_MODS = ('mod1', 'mod2', 'mod3', 'mod4', 'mod5')

SCHEMA = {
    'general': {
        'val_interval': _int(1, note=' (seamseg validates when (epoch + 1) % val_interval is '
                                     '0, so 0 divides by zero; for no validation during '
                                     'training, give a value above [scheduler] epochs)'),
        'log_interval': _int(1, note=' (iterations between log lines; seamseg divides by it)'),
        'cudnn_benchmark': _bool()},
    'body': {
        'body': _choice('resnet18', 'resnet34', 'resnet50', 'resnet101', 'resnet152'),
        'weights': _text(),
        'normalization_mode': _choice('bn', 'syncbn', 'syncbn+bn', 'gn', 'syncbn+gn', 'off'),
        'activation': _choice('leaky_relu', 'relu', 'elu', 'identity'),
        'activation_slope': _float(0),
        'gn_groups': _int(1),
        'body_params': _struct(
            lambda v: isinstance(v, dict) and set(v) <= {'dilation', 'width_mult'} and
            _is_num(v.get('width_mult', 1), 0, True),
            'a dict such as {"width_mult": 0.25} with the entries dilation, width_mult '
            '(width_mult > 0)'),
        'num_frozen': _int(0, 5, ' (modules mod1 .. mod<num_frozen> are frozen)'),
        'bn_frozen': _bool(),
        'out_channels': _struct(lambda v: _mods(v, _pos_int),
                                'a dict of module name -> channels, e.g. {"mod2": 256, ...}'),
        'out_strides': _struct(lambda v: _mods(v, _pos_int),
                               'a dict of module name -> stride, e.g. {"mod2": 4, ...}')},
    'fpn': {
        'out_channels': _int(1),
        'extra_scales': _int(0, 4),
        'interpolation': _choice('nearest', 'bilinear'),
        'inputs': _struct(lambda v: _seq(v, item=lambda x: x in _MODS),
                          'a list of body modules among {}, e.g. ["mod2", "mod3", "mod4", '
                          '"mod5"]'.format(', '.join(_MODS))),
        'out_strides': _struct(lambda v: _seq(v, item=_pos_int),
                               'a tuple of positive integers, e.g. (4, 8, 16, 32)')},
    'rpn': {
        'hidden_channels': _int(1), 'stride': _int(1),
        'anchor_ratios': _struct(lambda v: _seq(v, item=lambda x: _is_num(x, 0, True)),
                                 'a tuple of positive numbers, e.g. (1., 0.5, 2.)'),
        'anchor_scale': _int(1), 'nms_threshold': _RATIO,
        'num_pre_nms_train': _int(1), 'num_post_nms_train': _int(1),
        'num_pre_nms_val': _int(1), 'num_post_nms_val': _int(1),
        'min_size': _int(0), 'num_samples': _int(1), 'pos_ratio': _RATIO,
        'pos_threshold': _RATIO, 'neg_threshold': _RATIO, 'void_threshold': _RATIO,
        'fpn_min_level': _int(0), 'fpn_levels': _int(1), 'sigma': _float(0, lo_open=True)},
    'roi': {
        'roi_size': _struct(lambda v: _seq(v, 2, _pos_int),
                            'two positive integers, e.g. (14, 14)'),
        'num_samples': _int(1), 'pos_ratio': _RATIO, 'pos_threshold': _RATIO,
        'neg_threshold_hi': _RATIO, 'neg_threshold_lo': _RATIO, 'void_threshold': _RATIO,
        'nms_threshold': _RATIO, 'score_threshold': _RATIO, 'max_predictions': _int(1),
        'fpn_min_level': _int(0), 'fpn_levels': _int(1), 'fpn_canonical_scale': _int(1),
        'fpn_canonical_level': _int(0), 'sigma': _float(0, lo_open=True),
        'bbx_reg_weights': _struct(lambda v: _seq(v, 4, lambda x: _is_num(x, 0, True)),
                                   'four positive numbers, e.g. (10., 10., 5., 5.)')},
    'optimizer': {
        'lr': _float(0), 'weight_decay': _float(0), 'weight_decay_norm': _bool(),
        'momentum': _float(0, 1), 'nesterov': _bool(),
        'loss_weights': _struct(lambda v: _seq(v, 4, lambda x: _is_num(x, 0)),
                                'four numbers >= 0 (obj, bbx, roi_cls, roi_bbx), e.g. '
                                '(1., 1., 1., 1.)')},
    'scheduler': {
        'epochs': _int(1, note=' (0 or fewer trains nothing)'),
        'type': _choice('linear', 'step', 'poly', 'multistep'),
        'update_mode': _choice('batch', 'epoch'),
        'params': _struct(lambda v: isinstance(v, dict),
                          'a dict, e.g. {"gamma": 0.9} (see [scheduler] type)'),
        'burn_in_steps': _int(0), 'burn_in_start': _float(0, 1, lo_open=True)},
    'dataloader': {
        'shortest_size': _int(1, MAX_IMAGE_SIDE, ' (pixels of the shorter image side; one '
                                                 '{0} x {0} float image is 0.8 GB)'.format(
                                                     MAX_IMAGE_SIDE)),
        'longest_max_size': _int(1, MAX_IMAGE_SIDE, ' (pixels)'),
        'train_batch_size': _int(1), 'val_batch_size': _int(1),
        'rgb_mean': _struct(lambda v: _seq(v, 3, _is_num),
                            'three numbers, e.g. (0.485, 0.456, 0.406)'),
        'rgb_std': _struct(lambda v: _seq(v, 3, lambda x: _is_num(x, 0, True)),
                           'three positive numbers, e.g. (0.229, 0.224, 0.225)'),
        'random_flip': _bool(),
        'random_scale': _struct(lambda v: _seq(v, item=lambda x: _is_num(x, 0, True)),
                                'positive scale factors: (low, high) draws uniformly, any '
                                'other count picks one, e.g. (0.8, 1)'),
        'num_workers': _int(0),
        'train_set': _text(), 'val_set': _text(), 'coco_gt': _text()},
}

#: Keys a training run needs that the defaults leave empty (seamseg gives them no default).
REQUIRED = (('dataloader', 'train_batch_size'), ('dataloader', 'val_batch_size'),
            ('dataloader', 'train_set'), ('dataloader', 'val_set'))

# [scheduler] params entries of each type (seamseg's scheduler_from_config reads them)
_SCHEDULER_PARAMS = {'linear': ('from', 'to'), 'step': ('step_size', 'gamma'),
                     'poly': ('gamma',), 'multistep': ('milestones', 'gamma')}


def _where(config_file, defaults_file, user, section, key):
    in_user = user is not None and user.has_option(section, key)
    return config_file if in_user else defaults_file


def check_values(config, config_file=None, defaults_file=DEFAULTS_FILE, user=None):
    """Parse every key of :data:`SCHEMA` and check its range and its agreement with the
    other keys, as the recipe will read them.

    Parameters
    ----------
    config : configparser.ConfigParser
        The merged configuration.
    config_file, defaults_file : str
        Named in the message: the user's file when it sets the key, else the defaults.
    user : configparser.ConfigParser, optional
        The user's file alone (which keys it sets).

    Returns
    -------
    dict
        ``{(section, key): parsed value}``; empty values (allowed by the defaults) are None.

    Raises
    ------
    ConfigError
        ``FILE: [section] key = VALUE is not ...; allowed: ...`` for the first bad value.
    """
    values = {}
    for section, checks in SCHEMA.items():
        for key, check in checks.items():
            text = config[section].get(key)
            if text is None or (text == '' and ((section, key) in REQUIRED or
                                                key == 'body_params')):
                # empty in the defaults: body_params means {}, the others are required by
                # check_training_config
                values[section, key] = {} if key == 'body_params' else None
                continue
            try:
                values[section, key] = check(text)
            except _Bad as exc:
                raise ConfigError('{}: [{}] {} = {} {}; allowed: {}'.format(
                    _where(config_file, defaults_file, user, section, key), section, key,
                    text or "''", exc.args[0], check.allowed)) from None
    _check_agreement(values, lambda s, k: _where(config_file, defaults_file, user, s, k))
    return values


def _check_agreement(v, where):
    """Checks across keys (what seamseg would fail on mid-run, or silently misuse)."""
    def fail(section, key, text):
        raise ConfigError('{}: [{}] {} {}'.format(where(section, key), section, key, text))
    strides = v['fpn', 'out_strides']
    for head in ('rpn', 'roi'):
        lo, n = v[head, 'fpn_min_level'], v[head, 'fpn_levels']
        if lo + n > len(strides):
            fail(head, 'fpn_levels', '= {} from fpn_min_level {} needs {} FPN levels but [fpn] '
                 'out_strides has {}; lower fpn_levels or fpn_min_level'.format(
                     n, lo, lo + n, len(strides)))
    unknown = [m for m in v['fpn', 'inputs'] if m not in v['body', 'out_channels']]
    if unknown:
        fail('fpn', 'inputs', 'names {} which [body] out_channels does not list ({})'.format(
            ', '.join(unknown), ', '.join(v['body', 'out_channels'])))
    if v['optimizer', 'nesterov'] and v['optimizer', 'momentum'] == 0:
        fail('optimizer', 'nesterov', '= yes needs a momentum above 0 (torch refuses Nesterov '
             'without momentum); set nesterov = no or a momentum such as 0.9')
    kind, params = v['scheduler', 'type'], v['scheduler', 'params']
    lacking = [p for p in _SCHEDULER_PARAMS[kind] if p not in params]
    if lacking:
        fail('scheduler', 'params', '= {!r} lacks {} for type = {}; e.g. {}'.format(
            params, ', '.join(lacking), kind, {
                'linear': '{"from": 1.0, "to": 0.0}', 'step': '{"step_size": 30, "gamma": 0.1}',
                'poly': '{"gamma": 0.9}', 'multistep': '{"milestones": [60, 80], "gamma": 0.1}'}
            [kind]))


def check_training_config(config, config_file):
    """The keys a training run needs that the defaults leave empty, named with the file.

    Parameters
    ----------
    config : configparser.ConfigParser
    config_file : str

    Raises
    ------
    ConfigError
    """
    for section, key in REQUIRED:
        if not config[section].get(key):
            raise ConfigError('{}: [{}] {} is not set; seamseg gives it no default: set {} '
                              '(allowed: {})'.format(
                                  config_file, section, key, key,
                                  'an integer >= 1' if key.endswith('batch_size') else
                                  'the split name (ISS lst/<name>.txt, COCO '
                                  'annotations/instances_<name>.json)'))
    weights = config['body'].get('weights')
    if weights:
        problem = path_problem(weights)
        if problem:
            raise ConfigError('{}: [body] weights = {} {}: give the pre-trained body file, '
                              'or leave it empty'.format(config_file, weights, problem))
