"""One rank of test_distributed.py's HorovodComm test: every collective once, results as JSON.

Usage: python hvd_comm_worker.py OUT_DIR
"""
import json
import os
import sys

import gluontrain.mx  # noqa: F401  (gluoncv through the shim first)
from gluontrain.mx.distributed import HorovodComm


def main(out_dir):
    comm = HorovodComm()
    rank = comm.rank
    result = {
        'rank': rank, 'world_size': comm.world_size,
        # names in another order on each rank: the mean still pairs them by name
        'mean': comm.allreduce_mean({'b': 1.0 + rank, 'a': 10.0 * rank} if rank
                                    else {'a': 10.0 * rank, 'b': 1.0 + rank}),
        # objects of different sizes per rank, bytes 0..255 included
        'gathered': comm.allgather_object({'rank': rank, 'blob': list(bytes(range(256)) *
                                                                      (rank + 1))}),
        'broadcast': comm.broadcast_object({'from': rank, 'list': [rank] * 3}, root=1),
    }
    comm.barrier()
    result['gathered'] = [(g['rank'], len(g['blob']), g['blob'][:3] + g['blob'][-2:])
                          for g in result['gathered']]
    with open(os.path.join(out_dir, 'rank{}.json'.format(rank)), 'w') as f:
        json.dump(result, f)


if __name__ == '__main__':
    main(sys.argv[1])
