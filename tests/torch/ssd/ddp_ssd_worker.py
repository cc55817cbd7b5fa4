"""One rank of the 2-process SSD tests (run by torchrun from test_ssd_distributed.py; not a
test): ``gluontrain train ssd`` with argv[2:], recording what this rank did into argv[1].

Writes ``rank{R}.pt`` (the net's initial and final state_dicts), ``rank{R}.json`` (the
training dataset indices this rank loaded, in order, the final validation, rank and world
size). With ``GLUONTRAIN_TEST_CRASH_AT=N`` rank 1 raises at the step that would make
iteration N + 1 (a crash: torchrun then stops rank 0 too).
"""
import json
import os
import sys

import torch

from gluontrain.torch.data.voc import VOCDetection
from gluontrain.torch.ssd import recipe
from gluontrain.torch.ssd.step import SSDStep


def main(out_dir, argv):
    torch.set_num_threads(1)
    rank = int(os.environ['RANK'])
    loaded, record = [], {}
    real_getitem, real_train = VOCDetection.__getitem__, recipe.train

    def getitem(self, index):
        loaded.append(int(index))
        return real_getitem(self, index)

    def spy_train(net, *args):
        initial = {k: v.clone() for k, v in net.state_dict().items()}
        state = real_train(net, *args)
        torch.save({'initial': initial, 'final': net.state_dict()},
                   os.path.join(out_dir, 'rank{}.pt'.format(rank)))
        record.update(val=state.scores.get('val'), rank=state.rank,
                      world_size=state.world_size, iteration=state.iteration)
        return state

    crash_at = os.environ.get('GLUONTRAIN_TEST_CRASH_AT')
    if crash_at and rank == 1:
        real_step = SSDStep.__call__

        def crash(self, batch, state=None):
            if state.iteration == int(crash_at):
                raise RuntimeError('planted crash at iteration {}'.format(crash_at))
            return real_step(self, batch, state)
        SSDStep.__call__ = crash
    VOCDetection.__getitem__ = getitem
    recipe.train = spy_train
    try:
        recipe.main(argv)
    finally:
        with open(os.path.join(out_dir, 'rank{}.json'.format(rank)), 'w') as f:
            json.dump(dict(record, loaded=loaded), f)


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2:])
