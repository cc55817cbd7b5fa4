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
