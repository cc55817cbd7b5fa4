"""Train SSD300 as amdegroot/ssd.pytorch's train.py does, through gluontrain.

Example: python scripts/train_ssd.py --dataset_root ~/data/VOCdevkit --cuda false
Same as: gluontrain train ssd [arguments]
"""
import sys

from gluontrain.__main__ import main

if __name__ == '__main__':
    sys.exit(main(['train', 'ssd'] + sys.argv[1:]))
