"""SSD300 configurations: ssd.pytorch's keys and values, COCO num_classes corrected."""
from gluontrain.torch.ssd import config

KEYS = {'num_classes', 'lr_steps', 'max_iter', 'feature_maps', 'min_dim', 'steps',
        'min_sizes', 'max_sizes', 'aspect_ratios', 'variance', 'clip', 'name'}


def test_keys_and_shared_geometry():
    for cfg in (config.voc, config.coco):
        assert set(cfg) == KEYS
        assert cfg['feature_maps'] == [38, 19, 10, 5, 3, 1]
        assert cfg['min_dim'] == 300
        assert cfg['steps'] == [8, 16, 32, 64, 100, 300]
        assert cfg['aspect_ratios'] == [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
        assert cfg['variance'] == [0.1, 0.2]
        assert cfg['clip'] is True
        # every max size is the next map's min size
        assert cfg['max_sizes'][:-1] == cfg['min_sizes'][1:]


def test_voc_values():
    voc = config.voc
    assert voc['num_classes'] == 21
    assert voc['lr_steps'] == (80000, 100000, 120000)
    assert voc['max_iter'] == 120000
    assert voc['min_sizes'] == [30, 60, 111, 162, 213, 264]
    assert voc['max_sizes'] == [60, 111, 162, 213, 264, 315]
    assert voc['name'] == 'VOC'


def test_coco_values_and_num_classes_fix():
    coco = config.coco
    assert coco['num_classes'] == 81  # 80 categories + background
    assert config.COCO_NUM_CLASSES_REFERENCE == 201
    assert coco['lr_steps'] == (280000, 360000, 400000)
    assert coco['max_iter'] == 400000
    assert coco['min_sizes'] == [21, 45, 99, 153, 207, 261]
    assert coco['max_sizes'] == [45, 99, 153, 207, 261, 315]
    assert coco['name'] == 'COCO'


def test_means_bgr():
    assert config.MEANS == (104, 117, 123)
