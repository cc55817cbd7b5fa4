"""``--amp`` beside fp32 for the PyTorch YOLOv3 on a GPU (issue 24): the same seeded weights and
batches, the first batch's losses of both, how many updates the dynamic loss scale skipped
(``AMP: decreasing loss scale`` lines, MXNet AMP's log line) and the losses after that.

    python bench/yolo3_amp.py [--network darknet53] [--epochs 3] [--out DIR]

``--amp`` needs CUDA (the recipe refuses it on a CPU); ``--gpus ''`` runs only the fp32 side
on the CPU, to check the script itself. Prints a markdown table and the per-batch ObjLoss.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r'\[Epoch (\d+)\]\[Batch (\d+)\], LR: \S+, Speed: ([\d.]+) samples/sec, '
                  r'ObjLoss=([\d.]+), BoxCenterLoss=([\d.]+), BoxScaleLoss=([\d.]+), '
                  r'ClassLoss=([\d.]+)')


def run(out, amp, args):
    """One training run; returns (wall seconds, parsed batch lines, AMP lines, last mAP line)."""
    prefix = os.path.join(out, 'amp' if amp else 'fp32') + '/'
    cmd = [sys.executable, os.path.join(ROOT, 'scripts', 'train_yolov3.py'), '--backend', 'torch',
           '--network', args.network, '--dataset', 'synthetic', '--gpus', args.gpus,
           '--no-pretrained-base', '--batch-size', str(args.batch_size), '-j', str(args.num_workers),
           '--data-shape', str(args.data_shape), '--no-random-shape', '--epochs', str(args.epochs),
           '--log-interval', '1', '--val-interval', str(args.epochs), '--save-prefix', prefix]
    start = time.time()
    proc = subprocess.run(cmd + (['--amp'] if amp else []), capture_output=True, text=True,
                          check=False)
    wall = time.time() - start
    logs = [f for f in os.listdir(prefix) if f.endswith('_train.log')] \
        if os.path.isdir(prefix) else []
    if proc.returncode or not logs:
        sys.exit('{} failed ({}):\n{}'.format(' '.join(cmd), proc.returncode,
                                              proc.stderr[-3000:]))
    with open(os.path.join(prefix, logs[0])) as f:
        text = f.read()
    rows = [tuple(float(g) for g in m.groups()) for m in LINE.finditer(text)]
    amp_lines = [l for l in text.splitlines() if 'AMP:' in l]
    maps = [l for l in text.splitlines() if l.startswith('mAP=')]
    return wall, rows, amp_lines, maps[-1] if maps else 'mAP: none logged'


def main():
    """Both runs, then the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--network', default='darknet53')
    parser.add_argument('--epochs', type=int, default=3)
    parser.add_argument('--batch-size', type=int, default=16)
    parser.add_argument('--data-shape', type=int, default=416)
    parser.add_argument('--num-workers', '-j', type=int, default=8)
    parser.add_argument('--gpus', default='0')
    parser.add_argument('--out', default='')
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix='yolo3_amp_')
    runs = [('fp32', run(out, False, args))]
    if args.gpus.strip():
        runs.append(('--amp', run(out, True, args)))
    print('| run | wall s | samples/s (median of logged batches after the first 4) | '
          'batch-1 losses (Obj, Center, Scale, Class) | AMP lines | last batch losses |')
    print('|---|---|---|---|---|---|')
    for name, (wall, rows, lines, _) in runs:
        speed = statistics.median(r[2] for r in rows[4:]) if len(rows) > 4 else float('nan')
        print('| {} | {:.1f} | {:.1f} | {} | {} | {} |'.format(
            name, wall, speed, ', '.join('%.3f' % v for v in rows[0][3:]), len(lines),
            ', '.join('%.3f' % v for v in rows[-1][3:])))
    for name, (_, rows, lines, final_map) in runs:
        if lines:
            print('\n{} log: {} AMP lines: {} ... {}'.format(name, len(lines), lines[0],
                                                           lines[-1]))
        print('{} ObjLoss per batch (from the running means):'.format(name),
              ' '.join('%.0f' % v for v in per_batch(rows)))
        print('{} final {}'.format(name, final_map))


def per_batch(rows):
    """Each batch's ObjLoss from the logged running means (GluonCV's metrics are never reset:
    a running mean since the first batch, :mod:`gluontrain.core.meters`)."""
    losses, prev = [], 0.0
    for k, row in enumerate(rows, 1):
        losses.append(k * row[3] - (k - 1) * prev)
        prev = row[3]
    return losses


if __name__ == '__main__':
    main()
