"""One rank of the 2-process training test (run by torchrun from test_frcnn_distributed.py;
not a test): trains through the recipe's ``main`` and writes this rank's final parameters to
``rank{R}.pt`` in argv[1]."""
import os
import sys

import torch

from gluontrain.torch.frcnn import recipe
from gluontrain.torch.distributed import unwrap_model


def main(out_dir, argv):
    torch.set_num_threads(1)
    captured = {}
    real_train = recipe.train

    def train(net, *args):
        captured['net'] = net
        return real_train(net, *args)
    recipe.train = train
    recipe.main(argv)
    params = {k: v.detach().clone() for k, v in unwrap_model(captured['net']).named_parameters()}
    torch.save(params, os.path.join(out_dir, 'rank{}.pt'.format(os.environ['RANK'])))


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2:])
