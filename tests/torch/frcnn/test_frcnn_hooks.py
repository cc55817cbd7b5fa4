"""seamseg's end of epoch and resume (:class:`SeamsegCheckpointHook`); the hooks at work in
whole runs are tested through the recipe (test_frcnn_recipe.py)."""
from types import SimpleNamespace

import pytest
import torch

from gluontrain.core.load_report import WeightsLoadError
from gluontrain.torch.frcnn.hooks import SeamsegCheckpointHook
from gluontrain.torch.frcnn.meters import AverageMeter
from gluontrain.torch.frcnn.snapshot import save_snapshot


def test_checkpoint_hook_scores_follow_seamseg(tmp_path):
    class _State:
        epoch, iteration, scores = 0, 1, {}

    hook = SeamsegCheckpointHook(str(tmp_path), None, None, '', None, is_main=False)
    hook.best_score = .3
    st = _State()
    st.scores = {'val': (['det_map'], [.5])}
    hook.after_epoch(st)
    assert (hook.last_score, hook.best_score) == (.5, .5)
    st.scores = {}
    hook.after_epoch(st)  # no validation this epoch: last_score 0, the best stays
    assert (hook.last_score, hook.best_score) == (0., .5)


def test_resume_needs_the_training_state(tmp_path):
    """A snapshot with the modules only (as one written for pre-training) cannot be resumed:
    one line pointing to --pre_train, instead of seamseg's KeyError."""
    net = torch.nn.Module()
    net.body, net.rpn_head, net.roi_head = (torch.nn.Linear(2, 2) for _ in range(3))
    path = tmp_path / 'weights_only.pth.tar'
    save_snapshot(str(path), '', 0, 0, 0, 0, body=net.body.state_dict(),
                  rpn_head=net.rpn_head.state_dict(), roi_head=net.roi_head.state_dict())
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    log_hook = SimpleNamespace(meters={'loss': AverageMeter((), .9)})
    with pytest.raises(WeightsLoadError) as info:
        SeamsegCheckpointHook(str(tmp_path), net, optimizer, '', log_hook).resume(str(path))
    assert str(info.value) == (
        '--resume {0}: the snapshot holds the weights but not the training state (optimizer, '
        'loss_meter missing), so training cannot continue where it stopped; start from its '
        'weights with --pre_train {0} instead'.format(path))
