#!/usr/bin/env python
"""Write a synthetic dataset in the real VOC, COCO, Visual Genome, seamseg ISS or GluonCV RecordIO / .lst format.

    python scripts/make_synthetic_data.py voc --root DIR [--num-train N] [--num-val M] [--seed S]

``voc`` writes DIR/VOCdevkit/VOC2007 and VOC2012 (num-train trainval images per year,
num-val VOC2007 test images); ``coco`` writes DIR/annotations/instances_{train,val}2017.json
and DIR/{train,val}2017/; ``vg`` writes DIR/VG-SGG-with-attri.h5, the two JSON files and
DIR/VG_100K/; ``iss`` writes seamseg's DIR/img/, DIR/msk/, DIR/lst/{train,val}.txt,
DIR/metadata.bin and DIR/coco/{train,val}.json; ``rec`` / ``lst`` write GluonCV's custom-data
formats, DIR/{train,val}.rec + .idx or DIR/{train,val}.lst + DIR/images/ (classes: the default
VOC set's, numbered in its order: pass them to --classes).
"""
import argparse
import os
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('kind', choices=('voc', 'coco', 'vg', 'iss', 'rec', 'lst'),
                        help='dataset format')
    parser.add_argument('--root', required=True, help='output folder')
    parser.add_argument('--num-train', type=int, default=None,
                        help='training images (per year for voc); default: the writer\'s')
    parser.add_argument('--num-val', type=int, default=None,
                        help='validation/test images; default: the writer\'s')
    parser.add_argument('--seed', type=int, default=0, help='random seed (default 0)')
    args = parser.parse_args(argv)

    from gluontrain.data import records, synthetic  # pylint: disable=import-outside-toplevel

    start = time.time()
    if args.kind in ('rec', 'lst'):
        counts = {k: v for k, v in (('num_train', args.num_train), ('num_val', args.num_val))
                  if v is not None}
        out = records.write_records(args.root, args.kind, classes=synthetic.DEFAULT_VOC_CLASSES,
                                    seed=args.seed, **counts)
    else:
        out = synthetic.generate(args.kind, args.root, num_train=args.num_train,
                                 num_val=args.num_val, seed=args.seed)
    files = sum(len(names) for _, _, names in os.walk(args.root))
    print('wrote {} dataset to {} ({} files under {}, {:.1f}s)'.format(
        args.kind.upper(), out, files, os.path.abspath(args.root), time.time() - start))
    return 0


if __name__ == '__main__':
    sys.exit(main())
