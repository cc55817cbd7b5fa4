"""The shipped defaults equal seamseg's detection.ini; a user file overrides them strictly."""
import pytest

from gluontrain.torch.frcnn import config as cfg

# seamseg/config/defaults/detection.ini @ 15bd0b2, typed as train_detection reads them.
SEAMSEG_TYPED = {
    ('general', 'val_interval', 'getint'): 1,
    ('general', 'log_interval', 'getint'): 10,
    ('general', 'cudnn_benchmark', 'getboolean'): False,
    ('body', 'body', 'get'): 'resnet50',
    ('body', 'weights', 'get'): '',
    ('body', 'normalization_mode', 'get'): 'syncbn',
    ('body', 'activation', 'get'): 'leaky_relu',
    ('body', 'activation_slope', 'getfloat'): 0.01,
    ('body', 'gn_groups', 'getint'): 16,
    ('body', 'body_params', 'getstruct'): {},
    ('body', 'num_frozen', 'getint'): 2,
    ('body', 'bn_frozen', 'getboolean'): True,
    ('body', 'out_channels', 'getstruct'): {'mod1': 64, 'mod2': 256, 'mod3': 512,
                                           'mod4': 1024, 'mod5': 2048},
    ('body', 'out_strides', 'getstruct'): {'mod1': 4, 'mod2': 4, 'mod3': 8, 'mod4': 16,
                                          'mod5': 32},
    ('fpn', 'out_channels', 'getint'): 256,
    ('fpn', 'extra_scales', 'getint'): 0,
    ('fpn', 'interpolation', 'get'): 'nearest',
    ('fpn', 'inputs', 'getstruct'): ['mod2', 'mod3', 'mod4', 'mod5'],
    ('fpn', 'out_strides', 'getstruct'): (4, 8, 16, 32),
    ('rpn', 'hidden_channels', 'getint'): 256,
    ('rpn', 'stride', 'getint'): 1,
    ('rpn', 'anchor_ratios', 'getstruct'): (1., .5, 2.),
    ('rpn', 'anchor_scale', 'getint'): 8,
    ('rpn', 'nms_threshold', 'getfloat'): .7,
    ('rpn', 'num_pre_nms_train', 'getint'): 12000,
    ('rpn', 'num_post_nms_train', 'getint'): 2000,
    ('rpn', 'num_pre_nms_val', 'getint'): 6000,
    ('rpn', 'num_post_nms_val', 'getint'): 300,
    ('rpn', 'min_size', 'getint'): 16,
    ('rpn', 'num_samples', 'getint'): 256,
    ('rpn', 'pos_ratio', 'getfloat'): .5,
    ('rpn', 'pos_threshold', 'getfloat'): .7,
    ('rpn', 'neg_threshold', 'getfloat'): .3,
    ('rpn', 'void_threshold', 'getfloat'): .7,
    ('rpn', 'fpn_min_level', 'getint'): 0,
    ('rpn', 'fpn_levels', 'getint'): 4,
    ('rpn', 'sigma', 'getfloat'): 3.,
    ('roi', 'roi_size', 'getstruct'): (14, 14),
    ('roi', 'num_samples', 'getint'): 128,
    ('roi', 'pos_ratio', 'getfloat'): .25,
    ('roi', 'pos_threshold', 'getfloat'): .5,
    ('roi', 'neg_threshold_hi', 'getfloat'): .5,
    ('roi', 'neg_threshold_lo', 'getfloat'): 0.,
    ('roi', 'void_threshold', 'getfloat'): .7,
    ('roi', 'nms_threshold', 'getfloat'): .3,
    ('roi', 'score_threshold', 'getfloat'): .05,
    ('roi', 'max_predictions', 'getint'): 100,
    ('roi', 'fpn_min_level', 'getint'): 0,
    ('roi', 'fpn_levels', 'getint'): 4,
    ('roi', 'fpn_canonical_scale', 'getint'): 224,
    ('roi', 'fpn_canonical_level', 'getint'): 2,
    ('roi', 'sigma', 'getfloat'): 1.,
    ('roi', 'bbx_reg_weights', 'getstruct'): (10., 10., 5., 5.),
    ('optimizer', 'lr', 'getfloat'): .01,
    ('optimizer', 'weight_decay', 'getfloat'): .0001,
    ('optimizer', 'weight_decay_norm', 'getboolean'): True,
    ('optimizer', 'momentum', 'getfloat'): .9,
    ('optimizer', 'nesterov', 'getboolean'): True,
    ('optimizer', 'loss_weights', 'getstruct'): (1., 1., 1., 1.),
    ('scheduler', 'epochs', 'getint'): 90,
    ('scheduler', 'type', 'get'): 'poly',
    ('scheduler', 'update_mode', 'get'): 'batch',
    ('scheduler', 'params', 'getstruct'): {'gamma': .9},
    ('scheduler', 'burn_in_steps', 'getint'): 500,
    ('scheduler', 'burn_in_start', 'getfloat'): .333,
    ('dataloader', 'shortest_size', 'getint'): 1024,
    ('dataloader', 'longest_max_size', 'getint'): 2048,
    ('dataloader', 'train_batch_size', 'get'): '',
    ('dataloader', 'val_batch_size', 'get'): '',
    ('dataloader', 'rgb_mean', 'getstruct'): (.485, .456, .406),
    ('dataloader', 'rgb_std', 'getstruct'): (.229, .224, .225),
    ('dataloader', 'random_flip', 'getboolean'): True,
    ('dataloader', 'random_scale', 'getstruct'): (.8, 1),
    ('dataloader', 'num_workers', 'getint'): 8,
    ('dataloader', 'train_set', 'get'): '',
    ('dataloader', 'val_set', 'get'): '',
    ('dataloader', 'coco_gt', 'get'): '',
}


def test_defaults_have_seamseg_sections_keys_and_values():
    conf = cfg.load_config(None)
    assert conf.sections() == ['general', 'body', 'fpn', 'rpn', 'roi', 'optimizer',
                               'scheduler', 'dataloader']
    keys = {(s, k) for s in conf.sections() for k in conf[s]}
    assert keys == {(s, k) for s, k, _ in SEAMSEG_TYPED}
    for (section, key, getter), expected in SEAMSEG_TYPED.items():
        assert getattr(conf[section], getter)(key) == expected, (section, key)


def test_user_file_overrides_defaults(tmp_path):
    user = tmp_path / 'user.ini'
    user.write_text('[body]\nbody = resnet18\nbody_params = {"width_mult": 0.25}\n'
                    '[dataloader]\ntrain_batch_size = 2\nshortest_size = 128\n')
    conf = cfg.load_config(str(user))
    assert conf['body']['body'] == 'resnet18'
    assert conf['body'].getstruct('body_params') == {'width_mult': 0.25}
    assert conf['dataloader'].getint('train_batch_size') == 2
    assert conf['dataloader'].getint('shortest_size') == 128
    assert conf['dataloader'].getint('longest_max_size') == 2048  # untouched default
    # config_to_string round trip (what the snapshots store)
    again = cfg._parser()
    again.read_string(cfg.config_to_string(conf))
    assert {s: dict(again[s]) for s in again.sections()} == \
        {s: dict(conf[s]) for s in conf.sections()}


def test_unknown_key_names_file_section_and_key(tmp_path):
    user = tmp_path / 'typo.ini'
    user.write_text('[optimizer]\nweight_decai = 0.1\n')
    with pytest.raises(cfg.ConfigError) as err:
        cfg.load_config(str(user))
    msg = str(err.value)
    assert str(user) in msg and "'weight_decai'" in msg and '[optimizer]' in msg
    assert "'weight_decay'" in msg  # the suggestion


def test_unknown_section_and_bad_files(tmp_path):
    user = tmp_path / 'sec.ini'
    user.write_text('[optimiser]\nlr = 0.1\n')
    with pytest.raises(cfg.ConfigError, match=r'unknown section \[optimiser\].*optimizer'):
        cfg.load_config(str(user))
    with pytest.raises(cfg.ConfigError, match='does not exist'):
        cfg.load_config(str(tmp_path / 'missing.ini'))
    bad = tmp_path / 'bad.ini'
    bad.write_text('lr = 0.1\n')
    with pytest.raises(cfg.ConfigError, match='not a valid .ini file'):
        cfg.load_config(str(bad))
    dflt = tmp_path / 'dflt.ini'
    dflt.write_text('[DEFAULT]\nlr = 0.1\n')
    with pytest.raises(cfg.ConfigError, match=r'\[DEFAULT\]'):
        cfg.load_config(str(dflt))


# ----- values (issue 21): each bad value is one line naming file, section, key, value and
# what is allowed, when the file is loaded (before any model is built)

@pytest.mark.parametrize('section, line, words', [
    # seamseg: SyntaxError from ast.literal_eval, naming nothing
    ('body', 'body_params = {"width_mult": 0.25', r'\[body\] body_params = \{"width_mult": '
                                                  r'0.25 is not a Python literal'),
    # seamseg: "could not convert string to float: 'abc'"
    ('optimizer', 'lr = abc', r"\[optimizer\] lr = abc is not a number; allowed: a number >= 0"),
    # seamseg: "Not a boolean: maybe"
    ('dataloader', 'random_flip = maybe', r'\[dataloader\] random_flip = maybe is not a '
                                          r'boolean; allowed: yes/no'),
    # seamseg: ZeroDivisionError at the first log line
    ('general', 'log_interval = 0', r'\[general\] log_interval = 0 is out of range; allowed: '
                                    r'an integer >= 1'),
    # seamseg: ZeroDivisionError after the first epoch; refused, with the way to validate rarely
    ('general', 'val_interval = 0', r'val_interval = 0 is out of range; allowed: an integer '
                                    r'>= 1 .*for no validation during training, give a value '
                                    r'above \[scheduler\] epochs'),
    # seamseg: trains nothing and exits 0
    ('scheduler', 'epochs = -1', r'\[scheduler\] epochs = -1 is out of range; allowed: an '
                                 r'integer >= 1 \(0 or fewer trains nothing\)'),
    # MemoryError at the first batch
    ('dataloader', 'shortest_size = 100000000', r'shortest_size = 100000000 is out of range; '
                                                r'allowed: an integer >= 1 and <= 8192'),
    # reported only after training had started
    ('dataloader', 'shortest_size = 0', r'shortest_size = 0 is out of range'),
    ('dataloader', 'num_workers = -2', r'num_workers = -2 is out of range'),
    ('dataloader', 'train_batch_size = 0', r'train_batch_size = 0 is out of range'),
    ('body', 'body = resnet19', r"body = resnet19 is not one of the known values \(did you "
                                r"mean 'resnet18'"),
    ('body', 'num_frozen = 6', r'num_frozen = 6 is out of range; allowed: an integer >= 0 and '
                               r'<= 5'),
    ('rpn', 'nms_threshold = nan', r'nms_threshold = nan is not a finite number'),
    ('roi', 'roi_size = (14,)', r'roi_size = \(14,\) has the wrong form; allowed: two '
                                r'positive integers'),
    ('scheduler', 'burn_in_start = 0', r'burn_in_start = 0 is out of range; allowed: a number '
                                       r'> 0 and <= 1'),
    ('optimizer', 'momentum = 1.5', r'momentum = 1.5 is out of range'),
])
def test_bad_value_names_file_section_key_value_and_allowed(tmp_path, section, line, words):
    user = tmp_path / 'bad.ini'
    user.write_text('[{}]\n{}\n'.format(section, line))
    with pytest.raises(cfg.ConfigError, match=words) as err:
        cfg.load_config(str(user))
    msg = str(err.value)
    assert msg.startswith(str(user) + ': [' + section + '] ') and '\n' not in msg


@pytest.mark.parametrize('lines, words', [
    ('[rpn]\nfpn_levels = 5\n', r'\[rpn\] fpn_levels = 5 from fpn_min_level 0 needs 5 FPN '
                                r'levels but \[fpn\] out_strides has 4'),
    ('[fpn]\ninputs = ["mod2", "mod6"]\n', r'\[fpn\] inputs = \["mod2", "mod6"\] has the wrong'),
    ('[optimizer]\nmomentum = 0\n', r'\[optimizer\] nesterov = yes needs a momentum above 0'),
    ('[scheduler]\ntype = step\n', r'\[scheduler\] params = .* lacks step_size for type = step'),
])
def test_values_that_disagree_are_refused(tmp_path, lines, words):
    user = tmp_path / 'cross.ini'
    user.write_text(lines)
    with pytest.raises(cfg.ConfigError, match=words):
        cfg.load_config(str(user))


def test_bad_default_names_the_defaults_file(tmp_path):
    dflt = tmp_path / 'defaults.ini'
    dflt.write_text(open(cfg.DEFAULTS_FILE).read().replace('log_interval = 10',
                                                           'log_interval = ten'))
    user = tmp_path / 'user.ini'
    user.write_text('[general]\nval_interval = 2\n')
    with pytest.raises(cfg.ConfigError, match=r'defaults.ini: \[general\] log_interval = ten '
                                              r'is not an integer'):
        cfg.load_config(str(user), str(dflt))


def test_every_numeric_default_has_a_range():
    conf = cfg.load_config(None)
    for (section, key, getter), _ in SEAMSEG_TYPED.items():
        assert key in cfg.SCHEMA[section], (section, key)
        check = cfg.SCHEMA[section][key]
        if getter in ('getint', 'getfloat'):
            assert 'integer' in check.allowed or 'number' in check.allowed, (section, key)
            assert '>' in check.allowed, (section, key)  # a lower bound at least
    assert set(cfg.SCHEMA) == set(conf.sections())


def test_training_config_requires_batch_sizes_and_splits(tmp_path):
    user = tmp_path / 'nobatch.ini'
    user.write_text('[dataloader]\ntrain_set = train\nval_set = val\nval_batch_size = 1\n')
    with pytest.raises(cfg.ConfigError, match=r'nobatch.ini: \[dataloader\] train_batch_size '
                                              r'is not set'):
        cfg.check_training_config(cfg.load_config(str(user)), str(user))
    user.write_text('[dataloader]\ntrain_set = train\nval_set = val\nval_batch_size = 1\n'
                    'train_batch_size = 1\n[body]\nweights = {}\n'.format(tmp_path))
    with pytest.raises(cfg.ConfigError, match=r'\[body\] weights = .* is a folder, not a file'):
        cfg.check_training_config(cfg.load_config(str(user)), str(user))


def test_a_folder_given_as_the_config_says_so(tmp_path):
    with pytest.raises(cfg.ConfigError, match='is a folder, not a file'):
        cfg.load_config(str(tmp_path))
