"""seamseg's snapshot layout, resume and pre-train loading."""
import pytest
import torch

from gluontrain.torch.frcnn import snapshot as S
from gluontrain.torch.frcnn.config import load_config
from gluontrain.torch.frcnn.meters import AverageMeter


class _Net(torch.nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.body = torch.nn.Linear(2, 2)
        self.rpn_head = torch.nn.Linear(2, 3)
        self.roi_head = torch.nn.Linear(2, n)


def _save(path, net, epoch=4):
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    meters = {k + '_meter': AverageMeter((), .9).state_dict() for k in S.METERS}
    S.save_snapshot(str(path), load_config(None), epoch, 0, 0.25, 120,
                    body=net.body.state_dict(), rpn_head=net.rpn_head.state_dict(),
                    roi_head=net.roi_head.state_dict(), optimizer=opt.state_dict(), **meters)


def test_layout_and_resume(tmp_path):
    path = tmp_path / S.LAST
    src = _Net()
    _save(path, src)
    data = S.load_snapshot(str(path))
    assert set(data) == {'config', 'state_dict', 'training_meta'}
    assert set(data['state_dict']) == {'body', 'rpn_head', 'roi_head', 'optimizer',
                                       'loss_meter', 'obj_loss_meter', 'bbx_loss_meter',
                                       'roi_cls_loss_meter', 'roi_bbx_loss_meter'}
    assert data['training_meta'] == {'epoch': 4, 'last_score': 0, 'best_score': 0.25,
                                     'global_step': 120}
    assert '[body]' in data['config'] and 'resnet50' in data['config']
    dst = _Net()
    S.resume_from_snapshot(dst, str(path))
    assert torch.equal(dst.roi_head.weight, src.roi_head.weight)
    assert not list(tmp_path.glob('.*tmp'))  # staged write left nothing behind
    S.copy_best(str(tmp_path))
    assert (tmp_path / S.BEST).read_bytes() == path.read_bytes()


def test_pre_train_module_prefix_and_shape_mismatch(tmp_path):
    path = tmp_path / 'a.pth.tar'
    src = _Net(n=5)
    _save(path, src)
    dst = _Net(n=3)
    before = dst.roi_head.weight.clone()
    S.pre_train_from_snapshots(dst, [str(path)])
    assert torch.equal(dst.body.weight, src.body.weight)
    assert torch.equal(dst.roi_head.weight, before)  # 5 vs 3 classes: dropped, as seamseg
    other = _Net()
    S.pre_train_from_snapshots(other, ['rpn_head:' + str(path)])
    assert torch.equal(other.rpn_head.weight, src.rpn_head.weight)
    assert not torch.equal(other.body.weight, src.body.weight)
    with pytest.raises(ValueError, match='Unrecognized network module'):
        S.pre_train_from_snapshots(other, ['neck:' + str(path)])


def test_bad_snapshots(tmp_path):
    with pytest.raises(FileNotFoundError):
        S.load_snapshot(str(tmp_path / 'none.pth.tar'))
    torch.save([1, 2], tmp_path / 'list.pth')
    with pytest.raises(ValueError, match='not a seamseg snapshot'):
        S.load_snapshot(str(tmp_path / 'list.pth'))
    torch.save({'state_dict': {'body': {}}}, tmp_path / 'part.pth')
    with pytest.raises(KeyError, match='rpn_head'):
        S.resume_from_snapshot(_Net(), str(tmp_path / 'part.pth'))
