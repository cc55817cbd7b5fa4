"""Draw the loss / validation / learning-rate curves of a run from its metrics file.

Example: python scripts/plot_log.py out/yolo3_darknet53_voc_metrics.jsonl -o curves.png
(default output: the metrics file's name with ``_metrics.jsonl`` replaced by ``_curves.png``).
"""
import argparse
import os
import sys

from gluontrain.core.plots import plot_curves


def main(argv=None):
    """Parse ``argv``, draw the picture and print its path."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('metrics', help='{prefix}_metrics.jsonl written during training')
    p.add_argument('-o', '--out', default=None, help='output PNG')
    p.add_argument('--title', default=None, help='figure title (default: the run prefix)')
    args = p.parse_args(argv)
    base = args.metrics[:-len('_metrics.jsonl')] if args.metrics.endswith('_metrics.jsonl') \
        else os.path.splitext(args.metrics)[0]
    out = args.out or base + '_curves.png'
    title = args.title if args.title is not None else os.path.basename(base)
    print(plot_curves(args.metrics, out, title=title))
    return 0


if __name__ == '__main__':
    sys.exit(main())
