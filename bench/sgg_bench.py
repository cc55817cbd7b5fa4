"""Time the scene-graph recipe's evaluation against Scene-Graph-Benchmark's own code, and one
training step of the shipped PredCls config, in one run.

- evaluation: :func:`gluontrain.torch.sgg.evaluation.vg_eval.do_vg_evaluation` vs SGB's
  ``do_vg_evaluation`` (its ``sgg_eval.py`` / ``vg_eval.py`` written from the bare mirror at run
  time, as the tests do) on the same random predictions (``iou_types=('relations',)``); the
  two scores are checked equal before the ratio SGB / ours is printed;
- the PredCls MOTIFS step of ``configs/predcls_motifs_cpu.yaml`` on generated VG data:
  forward with losses, and forward + backward + clip + update, to show where the time goes.

Usage: python bench/sgg_bench.py [--threads 1] [--repeats 3] [--images 200]
       [--mode sgdet] [--mirror DIR]
"""
import argparse
import contextlib
import io
import logging
import os
import statistics
import sys
import tempfile
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..'))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'torch', 'sgg', 'evaluation'))

from gluontrain.torch.sgg.evaluation.vg_eval import do_vg_evaluation  # noqa: E402


def _quiet(name):
    logger = logging.getLogger(name)
    logger.handlers, logger.propagate = [logging.NullHandler()], False
    return logger


def _best(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), out


def bench_evaluation(args):
    """Ours vs SGB's do_vg_evaluation on one random case; prints the ratio."""
    import sgg_eval_support as support  # pylint: disable=import-outside-toplevel
    if args.mirror:
        support.SGB_MIRROR = args.mirror
    if not support.sgb_available():
        print('evaluation: SGB mirror {} not readable; skipped'.format(support.SGB_MIRROR))
        return
    from test_vg_eval import cfg_for  # pylint: disable=import-outside-toplevel
    ds, preds = support.random_case(0, num_images=args.images, mode=args.mode)
    cfg = cfg_for(args.mode)
    with tempfile.TemporaryDirectory() as d:
        _, sgb = support.load_sgb(d, zeroshot=[[1, 2, 1]])
        cwd = os.getcwd()
        os.chdir(d)  # SGB reads its zero-shot file relative to the working directory
        try:
            def run_sgb():
                with contextlib.redirect_stdout(io.StringIO()):
                    return sgb.do_vg_evaluation(cfg, ds, list(preds), None, _quiet('sgb'),
                                                ('relations',))

            def run_ours():
                return do_vg_evaluation(cfg, ds, list(preds), None, _quiet('ours'),
                                        ('relations',), zeroshot_triplet=[[1, 2, 1]],
                                        skip_images_without_predictions=True)
            t_sgb, m_sgb, ref = _best(run_sgb, args.repeats)
            t_ours, m_ours, ours = _best(run_ours, args.repeats)
        finally:
            os.chdir(cwd)
    if abs(float(ref) - float(ours)) > 1e-12:
        raise SystemExit('evaluation differs: SGB {} ours {}'.format(ref, ours))
    print('evaluation ({} images, {}): R@100 {:.4f} both; SGB {:.3f}s (median {:.3f}), '
          'ours {:.3f}s (median {:.3f}); SGB / ours = {:.2f}'.format(
              args.images, args.mode, float(ours), t_sgb, m_sgb, t_ours, m_ours,
              t_sgb / t_ours))


def bench_step(args):
    """Forward and full step of the shipped PredCls MOTIFS config on 4 generated images."""
    from gluontrain.data.vg import write_vg  # pylint: disable=import-outside-toplevel
    from gluontrain.torch.sgg import recipe  # pylint: disable=import-outside-toplevel
    from gluontrain.torch.sgg.config import CONFIGS_DIR, load_cfg  # pylint: disable=import-outside-toplevel
    from gluontrain.torch.sgg.solver import clip_grad_norm, make_optimizer  # pylint: disable=import-outside-toplevel
    with tempfile.TemporaryDirectory() as d:
        root = write_vg(os.path.join(d, 'vg'), num_train=30, num_val=4, seed=0)
        cfg = load_cfg(os.path.join(CONFIGS_DIR, 'predcls_motifs_cpu.yaml'),
                       ['OUTPUT_DIR', os.path.join(d, 'out'), 'DATASETS.NUM_VAL_IM', '4'],
                       data_dir=root)
        train_ds, val_ds, _ = recipe.get_dataset(None, cfg)
        net, model = recipe.get_net(cfg, [torch.device('cpu')])
        loader, _ = recipe.get_dataloader(net, train_ds, val_ds, None, None, 0, cfg)
        images, targets, _ = next(iter(loader))
        opt = make_optimizer(cfg, model, _quiet('opt'))
        model.train()

        def forward():
            return sum(model(images, targets).values())

        def step():
            loss = forward()
            opt.zero_grad()
            loss.backward()
            clip_grad_norm([(n, p) for n, p in model.named_parameters() if p.requires_grad],
                           cfg.SOLVER.GRAD_NORM_CLIP, clip=True)
            opt.step()
            return loss
        forward()
        t_fwd, _, _ = _best(forward, args.repeats)
        t_step, _, _ = _best(step, args.repeats)
    print('PredCls MOTIFS step ({} images): forward {:.3f}s, forward+backward+clip+update '
          '{:.3f}s; backward share {:.0%}'.format(len(targets), t_fwd, t_step,
                                                  1 - t_fwd / t_step))


def main(argv=None):
    """Parse the options and run both measurements."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--images', type=int, default=200)
    parser.add_argument('--mode', default='sgdet', choices=('predcls', 'sgcls', 'sgdet'))
    parser.add_argument('--mirror', default=None, help='SGB bare git dir')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    bench_evaluation(args)
    bench_step(args)


if __name__ == '__main__':
    main()
