"""seamseg's make_dataloader on generated data, and the shipped CPU configuration."""
import os

import pytest

from gluontrain.torch.frcnn import data as D
from gluontrain.torch.frcnn.config import load_config
from gluontrain.torch.frcnn.model import make_model
from gluontrain.torch.frcnn.transform import PackedSequence

CPU_INI = os.path.join(os.path.dirname(D.__file__), 'configs', 'synthetic_cpu.ini')


def test_cpu_config_loads_and_builds(coco_root):
    conf = load_config(CPU_INI)
    train, val = D.make_dataloaders(conf, coco_root)
    assert len(train.dataset) == 12 and len(val.dataset) == 6
    assert train.batch_sampler.drop_last and not val.batch_sampler.drop_last
    assert len(train) == len(train.batch_sampler) <= 12 // 4
    model = make_model(conf, train.dataset.num_thing, train.dataset.num_stuff)
    batch = next(iter(train))
    assert set(batch) == {'img', 'cat', 'iscrowd', 'bbx', 'idx', 'size'}
    assert isinstance(batch['img'], PackedSequence) and len(batch['img']) == 4
    for img in batch['img']:
        assert 192 * 0.8 - 1 <= min(img.shape[1:]) <= 192 and max(img.shape[1:]) <= 320
    out = model.head_outputs(list(batch['img']))
    assert out['obj_logits'].shape[0] == 4
    val_batch = next(iter(val))
    for img, (h, w) in zip(val_batch['img'], val_batch['size']):
        assert img.shape[1:] == D.make_transforms(conf['dataloader'])[1].output_size(w, h)[::-1]


def test_batch_size_must_be_set(coco_root, tmp_path):
    p = tmp_path / 'c.ini'
    p.write_text('[dataloader]\ntrain_set = train2017\nval_set = val2017\n')
    with pytest.raises(ValueError, match='train_batch_size'):
        D.make_dataloaders(load_config(str(p)), coco_root)
    p.write_text('[dataloader]\ntrain_set = train2017\nval_set = val2017\ntrain_batch_size = 50\n'
                 'val_batch_size = 1\nnum_workers = 0\n')
    with pytest.raises(ValueError, match='no complete batch'):
        D.make_dataloaders(load_config(str(p)), coco_root)


def test_empty_split_names_its_file_not_the_batch_size(coco_root, tmp_path):
    root = tmp_path / 'iss'
    D_root = str(root)
    from gluontrain.data import synthetic  # pylint: disable=import-outside-toplevel
    synthetic.write_iss(D_root, num_train=2, num_val=1, seed=0, image_size=64)
    (root / 'lst' / 'train.txt').write_text('')
    p = tmp_path / 'c.ini'
    p.write_text('[dataloader]\ntrain_set = train\nval_set = val\ntrain_batch_size = 1\n'
                 'val_batch_size = 1\nnum_workers = 0\n')
    with pytest.raises(D.DatasetError, match=r"^train split 'train' of .* has no image \(.*lst/"
                       r"train\.txt\): add images to it or set \[dataloader\] train_set"):
        D.make_dataloaders(load_config(str(p)), D_root)
