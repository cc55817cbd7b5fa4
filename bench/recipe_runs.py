"""The recipe runs of ``bench/cuda_recipes.py``: data, command lines, the timed child process
and the analysis of its timings.

As a child: ``python bench/recipe_runs.py --events FILE --device cuda [--sync-debug] RECIPE
ARGS...`` runs ``gluontrain train RECIPE ARGS...`` (the CLI's ``main``) with every
``DataLoader`` iterator's ``__next__`` timed, and writes the timings, the peak GPU memory and
the exit status to FILE; ``--sync-debug`` (CUDA) also counts, per training step, the
synchronizing CUDA calls ``torch.cuda.set_sync_debug_mode('warn')`` reports.
"""
import argparse
import configparser
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS_SGG = os.path.join(ROOT, 'gluontrain', 'torch', 'sgg', 'configs')
CONFIGS_FRCNN = os.path.join(ROOT, 'gluontrain', 'torch', 'frcnn', 'configs')


# ---------------------------------------------------------------------------- data and runs
def data_sizes(quick):
    """Images per generated set and their sides (realistic-but-small on the GPU)."""
    if quick:
        return {'voc': dict(num_train=8, num_val=4, image_size=(160, 256)),
                'coco': dict(num_train=16, num_val=4, image_size=(160, 256)),
                'vg': dict(num_train=24, num_val=4, image_size=(192, 288))}
    # VOC-like 300-500 px pictures; COCO / VG ones resized to 600 px by the recipes
    # (passes of 20+ iterations: the loader workers' restart each pass weighs as little as
    # it can in a short run)
    return {'voc': dict(num_train=400, num_val=64, image_size=(300, 500)),
            'coco': dict(num_train=192, num_val=32, image_size=(480, 640)),
            'vg': dict(num_train=200, num_val=16, image_size=(400, 600))}


def make_data(folder, quick):
    """Write the VOC, COCO and VG sets under ``folder``; returns their roots."""
    sys.path.insert(0, ROOT)
    from gluontrain.data import synthetic  # pylint: disable=import-outside-toplevel
    s = data_sizes(quick)
    return {'voc': synthetic.write_voc(os.path.join(folder, 'voc'), seed=0, **s['voc']),
            'coco': synthetic.write_coco(os.path.join(folder, 'coco'), seed=0, **s['coco']),
            'vg': synthetic.write_vg(os.path.join(folder, 'vg'), seed=0, **s['vg'])}


def _frcnn_config(path, quick, workers):
    """seamseg .ini: the shipped CPU one (quick), else ResNet-50 FPN-256 at 600 px, batch 8."""
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(CONFIGS_FRCNN, 'synthetic_cpu.ini'))
    if not quick:
        # from scratch (no ImageNet weights offline): plain BN on one process, nothing frozen
        for key in ('body_params', 'out_channels'):
            cfg.remove_option('body', key)  # back to the defaults: full-width ResNet-50
        cfg.set('body', 'body', 'resnet50')
        cfg.set('fpn', 'out_channels', '256')
        cfg.set('rpn', 'hidden_channels', '256')
        cfg.set('rpn', 'num_pre_nms_train', '12000')
        cfg.set('rpn', 'num_post_nms_train', '2000')
        cfg.set('rpn', 'num_pre_nms_val', '6000')
        cfg.set('rpn', 'num_post_nms_val', '300')
        cfg.set('roi', 'num_samples', '512')
        cfg.set('optimizer', 'lr', '0.002')  # from scratch, few steps: no divergence
        cfg.set('scheduler', 'burn_in_steps', '10')
        cfg.set('dataloader', 'shortest_size', '600')
        cfg.set('dataloader', 'longest_max_size', '1000')
        cfg.set('dataloader', 'train_batch_size', '8')
        cfg.set('dataloader', 'val_batch_size', '8')
    epochs = 2
    cfg.set('scheduler', 'epochs', str(epochs))
    cfg.set('general', 'val_interval', str(epochs))  # one validation, after the last epoch
    cfg.set('general', 'log_interval', '4')
    cfg.set('dataloader', 'num_workers', str(workers))
    with open(path, 'w') as f:
        cfg.write(f)
    return path


def _sgg_common(quick, device, workers, iters, out):
    opts = ['OUTPUT_DIR', out, 'MODEL.DEVICE', device, 'DATALOADER.NUM_WORKERS', str(workers),
            'SOLVER.MAX_ITER', str(iters), 'SOLVER.VAL_PERIOD', str(iters),
            'SOLVER.CHECKPOINT_PERIOD', str(iters), 'SOLVER.STEPS', '(100000,)',
            'SOLVER.WARMUP_ITERS', '2', 'DATASETS.NUM_VAL_IM', '4' if quick else '16']
    if not quick:
        # SGB's e2e_relation_*_FPN_1x layout at 600 px (R-50 body instead of X-101), batch 8
        opts += ['MODEL.BACKBONE.CONV_BODY', 'R-50-FPN', 'MODEL.BACKBONE.WIDTH_MULT', '1.0',
                 'MODEL.RESNETS.BACKBONE_OUT_CHANNELS', '256', 'MODEL.RPN.RPN_MID_CHANNEL', '256',
                 'MODEL.RPN.PRE_NMS_TOP_N_TRAIN', '2000', 'MODEL.RPN.POST_NMS_TOP_N_TRAIN', '2000',
                 'MODEL.RPN.FPN_POST_NMS_TOP_N_TRAIN', '2000',
                 'MODEL.RPN.PRE_NMS_TOP_N_TEST', '1000', 'MODEL.RPN.POST_NMS_TOP_N_TEST', '1000',
                 'MODEL.RPN.FPN_POST_NMS_TOP_N_TEST', '1000',
                 'MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE', '512',
                 'MODEL.ROI_HEADS.DETECTIONS_PER_IMG', '80',
                 'MODEL.ROI_BOX_HEAD.MLP_HEAD_DIM', '1024',
                 'INPUT.MIN_SIZE_TRAIN', '(600,)', 'INPUT.MAX_SIZE_TRAIN', '1000',
                 'INPUT.MIN_SIZE_TEST', '600', 'INPUT.MAX_SIZE_TEST', '1000',
                 'SOLVER.IMS_PER_BATCH', '8', 'TEST.IMS_PER_BATCH', '8', 'SOLVER.BASE_LR', '0.002']
    return opts


def plan(roots, folder, device, quick, workers):
    """The runs, in order: dicts with name, recipe, argv, warmup, timeout, min_seconds."""
    runs = []
    amp = [False] if device == 'cpu' else [False, True]  # AMP is CUDA-only in every recipe
    ssd_iters, warmup = (8, 2) if quick else (70, 10)
    for on in amp:
        out = os.path.join(folder, 'ssd_amp' if on else 'ssd')
        os.makedirs(out, exist_ok=True)
        argv = ['--dataset_root', roots['voc'], '--basenet', '', '--cuda',
                'true' if device == 'cuda' else 'false', '--batch_size', '4' if quick else '32',
                '--max_iter', str(ssd_iters), '--num_workers', str(workers),
                '--save_interval', '0', '--log_interval', '10', '--seed', '0', '--lr', '1e-4',
                '--save_folder', out + os.sep]
        if quick:
            argv += ['--width_mult', '0.125']
        if on:
            argv.append('--amp')
        runs.append({'name': 'ssd ' + ('amp (--amp)' if on else 'fp32'), 'recipe': 'ssd',
                     'argv': argv, 'amp': on, 'warmup': warmup, 'timeout': 150,
                     'min_seconds': 20 if quick else 45})
    cfg = _frcnn_config(os.path.join(folder, 'frcnn.ini'), quick, workers)
    runs.append({'name': 'frcnn fp32 (no AMP switch in seamseg)', 'recipe': 'frcnn',
                 'argv': ['--log_dir', os.path.join(folder, 'frcnn'), '--seed', '0',
                          '--tensorboard', '', cfg, roots['coco']],
                 'amp': False, 'warmup': 2 if quick else 6, 'timeout': 150,
                 'min_seconds': 20 if quick else 45})
    iters = 8 if quick else 50
    detector = os.path.join(folder, 'sgg_detector', 'model_final.pth')
    for on in amp:
        out = os.path.join(folder, 'sgg_detector' + ('_fp16' if on else ''))
        argv = (['--config-file', os.path.join(CONFIGS_SGG, 'detector_cpu.yaml'),
                 '--data-dir', roots['vg'], '--skip-test']
                + _sgg_common(quick, device, workers, iters, out)
                + ['DTYPE', 'float16' if on else 'float32'])
        runs.append({'name': 'sgg-detector ' + ('DTYPE float16' if on else 'fp32'),
                     'recipe': 'sgg-detector', 'argv': argv, 'amp': on, 'warmup': warmup,
                     'timeout': 150, 'min_seconds': 20 if quick else 40})
    for on in amp:
        out = os.path.join(folder, 'sgg_predcls' + ('_fp16' if on else ''))
        argv = (['--config-file', os.path.join(CONFIGS_SGG, 'predcls_motifs_cpu.yaml'),
                 '--data-dir', roots['vg'], '--skip-test']
                + _sgg_common(quick, device, workers, iters, out)
                + ['DTYPE', 'float16' if on else 'float32'])
        if not quick:
            argv += ['MODEL.ROI_RELATION_HEAD.CONTEXT_POOLING_DIM', '1024',
                     'MODEL.ROI_RELATION_HEAD.CONTEXT_HIDDEN_DIM', '256']
        # as a user: the relation head on the detector the run before pretrained
        runs.append({'name': 'sgg PredCls MOTIFS ' + ('DTYPE float16' if on else 'fp32'),
                     'recipe': 'sgg', 'argv': argv + ['MODEL.PRETRAINED_DETECTOR_CKPT', detector],
                     'argv_without': argv, 'needs': detector, 'amp': on, 'warmup': warmup,
                     'timeout': 150, 'min_seconds': 20 if quick else 40})
    # GluonCV's zoo run on one device (docs/zoo.md): darknet53, random shapes 320-608, COCO
    # data, 16 images per step (what each of 4 GPUs loads of the zoo's global batch 64);
    # fp32, --amp (float16) and --amp --amp-dtype bfloat16, each step's syncs counted
    for on in amp + (['bfloat16'] if device == 'cuda' else []):
        out = os.path.join(folder, 'yolo3' + ('_amp' if on is True else '_bf16' if on else ''))
        argv = ['--backend', 'torch', '--dataset', 'coco', '--dataset-root', roots['coco'],
                '--no-pretrained-base', '--gpus', '' if device == 'cpu' else '0',
                '-j', str(workers), '--log-interval', '10', '--save-interval', '0',
                '--save-prefix', out + os.sep]
        argv += (['--network', 'mobilenet0.25', '--batch-size', '4', '--data-shape', '64',
                  '--no-random-shape', '--epochs', '1'] if quick else
                 ['--network', 'darknet53', '--batch-size', '16', '--epochs', '3'])
        if on:
            argv.append('--amp')
        if on == 'bfloat16':
            argv += ['--amp-dtype', 'bfloat16']
        kind = ('amp bfloat16 (--amp --amp-dtype bfloat16)' if on == 'bfloat16' else
                'amp (--amp)' if on else 'fp32')
        runs.append({'name': 'yolo3-torch {} {}'.format(argv[argv.index('--network') + 1], kind),
                     'recipe': 'yolo3', 'argv': argv, 'amp': bool(on),
                     'child': ['--sync-debug'], 'warmup': 2 if quick else 6,
                     'timeout': 200, 'min_seconds': 10 if quick else 40})
    return runs


# ---------------------------------------------------------------------------- the child
def _images(batch):
    """Images in one batch of any recipe's loader (SSD tuples, seamseg dicts, SGB tuples)."""
    x = batch
    if isinstance(batch, dict):
        x = batch.get('img', batch.get('image', []))
    elif isinstance(batch, (tuple, list)) and batch:
        x = batch[0]
    if hasattr(x, 'tensors'):  # maskrcnn-benchmark's ImageList
        x = x.tensors
    if hasattr(x, 'shape'):
        return int(x.shape[0]) if len(x.shape) == 4 else 1
    try:
        return len(x)
    except TypeError:
        return 0


def instrument(record):
    """Time ``__next__`` of every DataLoader iterator; ``record`` gets the events."""
    import torch  # pylint: disable=import-outside-toplevel
    from torch.utils.data import dataloader  # pylint: disable=import-outside-toplevel
    base = dataloader._BaseDataLoaderIter  # pylint: disable=protected-access
    original = base.__next__
    cuda = torch.cuda.is_available()

    def timed_next(self):
        tic = time.perf_counter()
        batch = original(self)  # StopIteration passes through
        toc = time.perf_counter()
        key = '{}@{}'.format(type(self._dataset).__name__, id(self._dataset))  # noqa
        peak = torch.cuda.max_memory_allocated() if cuda else 0
        record.setdefault(key, {}).setdefault(str(id(self)), []).append(
            (tic, toc, _images(batch), peak))
        return batch
    base.__next__ = timed_next


def watch_syncs(steps):
    """``torch.cuda.set_sync_debug_mode('warn')``, and for every training step (from its
    ``before_batch`` hooks to the end of its ``after_batch`` hooks: the step and the per-step
    hooks, not the loader) ``(epoch, batch, synchronizing calls)`` appended to ``steps``."""
    import warnings  # pylint: disable=import-outside-toplevel
    import torch  # pylint: disable=import-outside-toplevel
    from gluontrain.core import loop  # pylint: disable=import-outside-toplevel
    torch.cuda.set_sync_debug_mode('warn')
    real_fire, open_ = loop._fire, []  # pylint: disable=protected-access

    def fire(hooks, event, state):
        if event == 'before_batch':
            catcher = warnings.catch_warnings(record=True)
            open_.append((catcher, catcher.__enter__()))
            warnings.simplefilter('always')
        try:
            return real_fire(hooks, event, state)
        finally:
            if event == 'after_batch' and open_:
                catcher, caught = open_.pop()
                catcher.__exit__(None, None, None)
                steps.append((state.epoch, state.batch, sum(
                    'synchroniz' in str(w.message) for w in caught)))
    loop._fire = fire  # pylint: disable=protected-access


def child_main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument('--events', required=True)
    p.add_argument('--device', default='cuda')
    p.add_argument('--sync-debug', action='store_true')
    p.add_argument('recipe')
    p.add_argument('args', nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    sys.path.insert(0, ROOT)
    import torch  # pylint: disable=import-outside-toplevel
    from gluontrain.__main__ import main  # pylint: disable=import-outside-toplevel
    record, sync_steps = {}, []
    instrument(record)
    cuda = a.device == 'cuda' and torch.cuda.is_available()
    if a.sync_debug and cuda:
        watch_syncs(sync_steps)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    tic = time.perf_counter()
    rc, error = None, None
    try:
        rc = main(['train', a.recipe] + a.args)
    except SystemExit as e:
        rc = e.code
    except BaseException as e:  # pylint: disable=broad-except
        error = '{}: {}'.format(type(e).__name__, e)
        import traceback  # pylint: disable=import-outside-toplevel
        traceback.print_exc()
    out = {'rc': rc, 'error': error, 'seconds': time.perf_counter() - tic, 'events': record,
           'sync_steps': sync_steps if a.sync_debug and cuda else None,
           'peak_mem_run': torch.cuda.max_memory_allocated() if cuda else None,
           'peak_reserved_run': torch.cuda.max_memory_reserved() if cuda else None}
    with open(a.events + '.tmp', 'w') as f:
        json.dump(out, f)
    os.replace(a.events + '.tmp', a.events)
    return 0 if rc in (0, None) and error is None else 1


# ---------------------------------------------------------------------------- analysis
def analyse(child, warmup):
    """Training and validation figures from one child's events."""
    events = child.get('events', {})
    res = {'child_rc': child.get('rc'), 'child_error': child.get('error'),
           'run_s': child.get('seconds')}
    mib = 2.0 ** 20
    if child.get('peak_mem_run'):
        res['peak_mem_run_mib'] = child['peak_mem_run'] / mib
        res['peak_reserved_run_mib'] = child['peak_reserved_run'] / mib
    if child.get('sync_steps') is not None:
        synced = [(e, b, n) for e, b, n in child['sync_steps'] if n]
        res['syncs'] = {'steps': len(child['sync_steps']), 'steps_with_syncs': len(synced),
                        'calls': sum(n for _, _, n in synced),
                        'batches': sorted({b for _, b, _ in synced})}
    if not events:
        return res
    total = {k: sum(len(v) for v in its.values()) for k, its in events.items()}
    train_key = max(total, key=total.get)
    passes = sorted(events[train_key].values(), key=lambda ev: ev[0][0])
    flat = [e for ev in passes for e in ev]
    res['train_batches'] = len(flat)
    res['train_passes'] = len(passes)
    periods, waits, images, seen = [], [], 0, 0
    for ev in passes:
        for i in range(len(ev) - 1):
            seen += 1
            if seen <= warmup:
                continue
            periods.append(ev[i + 1][1] - ev[i][1])
            waits.append(ev[i + 1][1] - ev[i + 1][0])
            images += ev[i][2]
    if periods:
        span = sum(periods)
        res.update({'iterations_timed': len(periods), 'images_timed': images,
                    'images_per_s': images / span if span else None,
                    'data_wait_fraction': sum(waits) / span if span else None,
                    'step_ms_median': statistics.median(periods) * 1e3,
                    'batch_images': flat[-1][2]})
    if flat[-1][3]:
        res['peak_mem_train_mib'] = max(e[3] for e in flat) / mib
    val = [ev for k, its in events.items() if k != train_key for ev in its.values()]
    if val:
        n = sum(e[2] for ev in val for e in ev)
        span = sum(ev[-1][1] - ev[0][0] for ev in val)
        res.update({'val_images': n, 'val_images_per_s': n / span if span else None})
    return res


def _fmt(v, f='{:.1f}'):
    return '-' if v is None else f.format(v)


def _syncs(row):
    s = row.get('syncs')
    return '' if not s else 'synchronizing CUDA calls in {} of {} steps ({} calls; batches {})'\
        .format(s['steps_with_syncs'], s['steps'], s['calls'], s['batches'])


def summary(row):
    if 'error' in row:
        return 'ERROR ' + row['error']
    return 'rc {} {} img/s, data {}, peak {} MiB, val {} img/s, {:.0f}s {}'.format(
        row.get('rc'), _fmt(row.get('images_per_s')),
        _fmt(row.get('data_wait_fraction'), '{:.1%}'), _fmt(row.get('peak_mem_run_mib'), '{:.0f}'),
        _fmt(row.get('val_images_per_s')), row.get('wall_s', 0), _syncs(row))


def markdown(results):
    """The tables of docs/performance.md's "On a GPU" section."""
    env = results.get('environment', {})
    lines = ['## On a GPU', '', '{} · torch {} (CUDA {}, cuDNN {}) · torchvision {} · numpy {} · '
             'Python {} · {} CPU cores · `{}`'.format(
                 env.get('gpu') or 'no GPU', env.get('torch'), env.get('cuda'), env.get('cudnn'),
                 env.get('torchvision'), env.get('numpy'), env.get('python'),
                 env.get('cpu_count'), ' '.join(sys.argv[1:]) or 'defaults'), '']
    sizes = results.get('data', {}).get('sizes')
    if sizes:
        lines += ['Data: ' + '; '.join('{} {} train / {} val, {}-{} px'.format(
            k.upper(), v['num_train'], v['num_val'], *v['image_size']) for k, v in sizes.items()),
            '']
    lines += ['| run | batch | images/s (train) | data wait | step ms (median) | '
              'peak GPU MiB train / run | val images/s | exit | wall s |',
              '|---|---|---|---|---|---|---|---|---|']
    for r in results.get('recipes', []):
        if r.get('skipped'):
            lines.append('| {} | skipped ({}) |||||||'.format(r['name'], r['skipped']))
            continue
        lines.append('| {} | {} | {} | {} | {} | {} / {} | {} | {} | {} |'.format(
            r['name'], r.get('batch_images', '-'), _fmt(r.get('images_per_s')),
            _fmt(r.get('data_wait_fraction'), '{:.1%}'), _fmt(r.get('step_ms_median')),
            _fmt(r.get('peak_mem_train_mib'), '{:.0f}'), _fmt(r.get('peak_mem_run_mib'), '{:.0f}'),
            _fmt(r.get('val_images_per_s')), r.get('rc', r.get('error', '-')),
            _fmt(r.get('wall_s'), '{:.0f}')))
    synced = ['- {}: {}'.format(r['name'], _syncs(r)) for r in results.get('recipes', [])
              if _syncs(r)]
    if synced:
        lines += ['', "`torch.cuda.set_sync_debug_mode('warn')`, per training step (the "
                  'step and its hooks; the log reads the device at its batch lines and at '
                  "each pass's end):"] + synced
    ops = results.get('ops') or []
    if ops:
        lines += ['', '| op | ours ms | torchvision ms | torchvision / ours | same output | note |',
                  '|---|---|---|---|---|---|']
        for o in ops:
            c = o['check']
            same = ('kept {} / {}, {}'.format(c['kept_ours'], c['kept_torchvision'],
                                             'same order' if c['equal'] else
                                             'same set' if c['same_set'] else 'DIFFERENT')
                    if 'kept_ours' in c else
                    'max |diff| {:.2e} (of {:.2f})'.format(c['max_abs_diff'], c['max_abs']))
            lines.append('| {} | {:.3f} | {:.3f} | {:.2f} | {} | {} |'.format(
                o['op'], o['ours_ms'], o['torchvision_ms'], o['speed_ratio_tv_over_ours'], same,
                o.get('note', '')))
    tests = results.get('tests')
    if tests:
        lines += ['', 'Tests with CUDA branches ({}): {} (exit {}, {:.0f}s)'.format(
            ', '.join(tests['files']), tests['summary'], tests['rc'], tests['seconds'])]
    lines += ['', 'Sections: ' + '; '.join(
        '{} {}'.format(k, v if v.startswith('ok') or not v.strip() else
                       'FAILED: ' + v.strip().splitlines()[-1])
        for k, v in results.get('sections', {}).items()),
              'Total wall time {:.0f}s.'.format(results.get('elapsed_s', 0)), '']
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(child_main())
