"""Command-line arguments of the YOLOv3 recipe, one parser for both backends: GluonCV's
``train_yolo3.py`` ones and a few more.

Every argument of the reference keeps its name and default. Added: ``--backend``
(``mxnet``, the default, or ``torch``), ``--dataset-root``, ``--classes``,
``--no-pretrained-base``, ``--cpus``, ``--load-weights``, ``--model-dir``,
``--reference-mixup``, ``--reference-transform``, ``--reference-metric``, ``--tensorboard``,
``--no-plots``, ``--preset``, ``--anchors``, ``--amp-dtype``, and for ``--backend torch``
only (refused on MXNet in one line) ``--channels-last``, ``--cudnn-benchmark``, ``--amp-dtype
bfloat16``. Numpy only: the MXNet recipe (:mod:`gluontrain.mx.yolo3`) and the PyTorch one
(:mod:`gluontrain.torch.yolo3`) both import it.
"""
import argparse
import os
import warnings

from ..core import model_store
from ..core.checkpoint import CHECKPOINT
from ..core.writers import tensorboard_available
from ..core.argtypes import (check_input_file, finite_non_negative_float, int_at_least,
                              int_list, multiple_of, non_negative_int, output_dir_problem,
                              positive_int)
from .anchors import GLUONCV_ANCHORS_TEXT, anchors_arg

BACKENDS = ('mxnet', 'torch')
DATASETS = ('voc', 'coco', 'custom', 'synthetic', 'rec', 'lst', 'coco-json')
NETWORKS = ('darknet53', 'mobilenet1.0', 'mobilenet0.25')
# the argument naming where outputs go, for the CLI's messages about unwritable files
OUTPUT_ARGUMENT = '--save-prefix'
# YOLOv3's coarsest output stride: the input must split into whole 32-pixel cells
STRIDE = 32
# the largest --data-shape: larger inputs run out of memory (GluonCV trains at 320-608)
MAX_DATA_SHAPE = 4096
# what fixes the network, its input or the meaning of the restored update count: a resume
# that changes one of these is refused (everything else is honoured and logged)
RESUME_MUST_MATCH = ('network', 'data_shape', 'dataset', 'classes', 'num_samples',
                     'batch_size', 'syncbn', 'anchors')

# The GluonCV model zoo's own training runs, argument by argument: the Namespace line that
# starts each zoo training log (dmlc/web-data, gluoncv/logs/detection/yolo3_*.log, recorded in
# tests/fixtures/zoo_logs/). Left to the machine or filled in by the script: gpus (8 GPUs
# there), save_prefix, num_samples. The darknet53 logs predate --warmup-epochs, --mixup,
# --label-smooth, --no-wd and --lr-mode: the last four did not exist (off, step: today's
# defaults); the warm-up did, hard-coded, and the logs' LR column fixes its length (VOC:
# 1.28E-04 at batch 99 of 258 = 0.001 x 99 / (3 x 258), three epochs; COCO: 2.70E-05 at batch 99
# of 1,832, two epochs; the COCO log is the 0.3 release's run, -j 48). docs/from_gluoncv.md,
# "Configurations".
_ZOO_RUN = dict(batch_size=64, data_shape=416, log_interval=100, lr=0.001, lr_decay=0.1,
                momentum=0.9, save_interval=10, seed=233, start_epoch=0, syncbn=True,
                val_interval=1, wd=0.0005)
_VOC_RUN = dict(_ZOO_RUN, dataset='voc', epochs=200, lr_decay_epoch='160,180')
_COCO_RUN = dict(_ZOO_RUN, dataset='coco', epochs=280, lr_decay_epoch='220,250')
# the mobilenet1.0 logs name every argument of today's script
_FULL = dict(label_smooth=False, lr_decay_period=0, lr_mode='step', mixup=False,
             no_mixup_epochs=20, no_random_shape=False, no_wd=False, warmup_lr=0.0)
PRESETS = {
    'darknet53_voc': dict(_VOC_RUN, network='darknet53', num_workers=16, warmup_epochs=3),
    'darknet53_coco': dict(_COCO_RUN, network='darknet53', num_workers=48, warmup_epochs=2),
    'mobilenet1.0_voc': dict(_VOC_RUN, **_FULL, network='mobilenet1.0', num_workers=32,
                             warmup_epochs=4),
    'mobilenet1.0_coco': dict(_COCO_RUN, **_FULL, network='mobilenet1.0', num_workers=32,
                              warmup_epochs=2),
}


def build_parser():
    """The argparse parser (also used to print ``--help`` in the docs)."""
    p = argparse.ArgumentParser(description='Train YOLO networks with random input shape.')
    a = p.add_argument
    a('--backend', type=str, default='mxnet', choices=BACKENDS,
      help='Framework that trains: mxnet (GluonCV\'s own, the default) or torch (the same '
           'recipe on PyTorch, reading and writing the same .params files).')
    a('--network', type=str, default='darknet53',
      help='Base network name which serves as feature extraction base: {}.'.format(
          ', '.join(NETWORKS)))
    a('--data-shape', type=multiple_of(STRIDE, "YOLOv3's coarsest stride", MAX_DATA_SHAPE),
      default=416,
      help='Input data shape for evaluation, use 320, 416, 608... '
           'Training is with random shapes from (320 to 608).')
    a('--anchors', type=anchors_arg, default='',
      help="YOLOv3 anchors, (w, h) in input pixels: three ;-separated scales (shallow first) of "
           "three w,h pairs, e.g. GluonCV's (the default) "
           "'10,13,16,30,33,23;30,61,62,45,59,119;116,90,156,198,373,326' (quoted: ; ends a "
           'shell command); scripts/propose_anchors.py proposes them for a dataset.')
    a('--batch-size', type=positive_int, default=64, help='Training mini-batch size')
    a('--dataset', type=str, default='voc',
      help='Training dataset: {}.'.format(', '.join(DATASETS)))
    a('--dataset-root', type=str, default=None,
      help='Dataset folder. voc/custom/synthetic: the folder holding VOC2007/ (gluoncv default '
           '~/.mxnet/datasets/voc); coco: the folder holding annotations/ (default '
           '~/.mxnet/datasets/coco); synthetic: generated there on first use; rec / lst: the '
           'folder holding train.rec + train.idx and val.rec + val.idx (or train.lst and '
           'val.lst, their image paths relative to it): GluonCV\'s RecordIO / .lst formats.')
    a('--train-json', type=str, default='',
      help='coco-json: your COCO-format training annotations (images found under '
           '--dataset-root by their file_name).')
    a('--val-json', type=str, default='',
      help='coco-json: your COCO-format validation annotations (scored with COCO AP).')
    a('--synthetic-val-images', type=positive_int, default=None, metavar='N',
      help='--dataset synthetic: draw N held-out test images instead of 50 (a steadier mAP; '
           'README job (a) uses 400); refused with other datasets.')
    a('--classes', type=str, default='',
      help='custom dataset: comma-separated class names (default: read from the annotations); '
           'synthetic: the VOC class names to draw (default: its five); '
           'rec / lst: the names of class ids 0, 1, ... (required); coco-json: the json\'s '
           'categories in its order (default: read from it).')
    a('--num-workers', '-j', dest='num_workers', type=non_negative_int, default=4,
      help='Number of data workers.')
    a('--gpus', type=str, default='0',
      help="Training with GPUs, you can specify 1,3 for example. '' trains on the CPU. With "
           '--backend torch the script starts one process per GPU (or joins torchrun\'s).')
    a('--cpus', type=non_negative_int, default=0,
      help='Train on N CPU contexts [cpu(0)..cpu(N-1)] through split_and_load (overrides '
           '--gpus); with --backend torch, N CPU processes the script starts (gloo).')
    a('--epochs', type=positive_int, default=200, help='Training epochs.')
    a('--resume', type=str, default='',
      help='Resume from a full checkpoint ({prefix}_last.ckpt): weights, trainer state, LR '
           'position, epoch, best mAP and RNG states. A .params file is loaded as weights only '
           '(the reference behaviour) with the LR schedule moved to --start-epoch.')
    a('--load-weights', type=str, default='',
      help='Initialise the network from a .params file and train from --start-epoch.')
    a('--transfer', type=str, default='',
      help='Fine-tune from another YOLOv3 with other classes (GluonCV\'s reset_class): a '
           'model-zoo name (yolo3_darknet53_coco..., found or fetched as --pretrained True) or '
           'a .params file with --transfer-classes; classes named in both keep their rows.')
    a('--transfer-classes', type=str, default='',
      help='The classes of a --transfer .params file, in its order (comma-separated).')
    a('--reuse-classes', type=reuse_pairs, default='',
      help='With --transfer: new:old pairs (names or indices) whose rows start from the old '
           'class; default: every class both lists name.')
    a('--keep-box-rows', action='store_true',
      help='With --transfer: keep the box and objectness rows even when no class is reused '
           '(GluonCV re-initialises them; docs/faithfulness.md).')
    a('--start-epoch', type=non_negative_int, default=0,
      help='Starting epoch for resuming from weights; a full checkpoint sets it itself.')
    a('--lr', type=finite_non_negative_float, default=0.001, help='Learning rate, default is 0.001')
    # gluoncv's LRScheduler asserts these modes (a bare AssertionError mid-setup): say it here
    a('--lr-mode', type=str, default='step',
      choices=('constant', 'step', 'linear', 'poly', 'cosine'),
      help='learning rate scheduler mode. options are step, poly and cosine.')
    a('--lr-decay', type=finite_non_negative_float, default=0.1,
      help='decay rate of learning rate. default is 0.1.')
    a('--lr-decay-period', type=non_negative_int, default=0,
      help='interval for periodic learning rate decays. default is 0 to disable.')
    a('--lr-decay-epoch', type=int_list, default='160,180',
      help='epochs at which learning rate decays. default is 160,180.')
    a('--warmup-lr', type=finite_non_negative_float, default=0.0,
      help='starting warmup learning rate. Parsed and unused, as in the reference.')
    a('--warmup-epochs', type=non_negative_int, default=0,
      help='number of warmup epochs.')
    a('--momentum', type=finite_non_negative_float, default=0.9,
      help='SGD momentum, default is 0.9')
    a('--wd', type=finite_non_negative_float, default=0.0005,
      help='Weight decay, default is 5e-4')
    a('--log-interval', type=non_negative_int, default=100,
      help='Logging mini-batch interval (0: no batch log lines, as the reference).')
    a('--save-prefix', type=str, default='', help='Saving parameter prefix')
    a('--save-interval', type=non_negative_int, default=10,
      help='Saving parameters epoch interval, best model will always be saved (0: only '
           'the best, as the reference).')
    a('--val-interval', default=1,
      type=int_at_least(1, 'is not an interval (the reference validates when (epoch + 1) % '
                           'val_interval == 0: 0 divides by zero; a value above --epochs '
                           'never validates)'),
      help='Epoch interval for validation (the reference divides by it: 0 is refused; a '
           'value above --epochs never validates).')
    a('--seed', type=non_negative_int, default=233, help='Random seed to be fixed.')
    a('--num-samples', type=int, default=-1,
      help='Training images. Use -1 to automatically get the number.')
    a('--syncbn', action='store_true', help='Use synchronize BN across devices.')
    a('--no-random-shape', action='store_true',
      help='Use fixed size(data-shape) throughout the training.')
    a('--no-wd', action='store_true',
      help='whether to remove weight decay on bias, and beta/gamma for batchnorm layers.')
    a('--mixup', action='store_true', help='whether to enable mixup.')
    a('--no-mixup-epochs', type=non_negative_int, default=20,
      help='Disable mixup training if enabled in the last N epochs.')
    a('--reference-mixup', action='store_true',
      help='Reproduce the reference bug: with --num-workers > 0 the workers never see mixup.')
    a('--reference-transform', action='store_true',
      help="Train with GluonCV's own YOLO3DefaultTrainTransform instead of the numpy one "
           '(same arrays, several times slower).')
    a('--reference-metric', action='store_true',
      help="Validate VOC with GluonCV's VOC07MApMetric instead of FastVOC07MApMetric "
           '(same values, about 5x slower).')
    a('--label-smooth', action='store_true', help='Use label smoothing.')
    a('--amp', action='store_true', help='Use MXNet AMP for mixed precision training (GPU).')
    a('--amp-dtype', type=str, default='float16', choices=('float16', 'bfloat16'),
      help="With --amp: float16 (GluonCV's AMP: float16 with dynamic loss scaling, on GPUs) "
           'or bfloat16 (--backend torch: no loss scaling, bfloat16 has float32\'s exponent '
           'range; GPUs of compute capability 8.0+, and the CPU).')
    a('--channels-last', action='store_true',
      help='--backend torch: the network and its input in channels_last (NHWC) memory '
           'format, the layout Tensor Cores prefer (same numbers within float32 rounding).')
    a('--cudnn-benchmark', action='store_true',
      help='--backend torch on GPUs: cuDNN times its convolution algorithms once for each '
           'input shape and keeps the fastest (torch.backends.cudnn.benchmark; random shapes: '
           'one tuning per shape, 10 for 320-608). MXNet does this by default.')
    a('--horovod', action='store_true',
      help='Use MXNet Horovod for distributed training, one process per device, launched '
           "with horovodrun (docs/distributed.md). Each process trains on GPU local_rank, or "
           "on the CPU with --gpus ''; --batch-size is the global batch.")
    a('--no-pretrained-base', action='store_true',
      help='Initialise the base network randomly instead of from ImageNet weights.')
    a('--pretrained-base', type=str, default='', metavar='FILE',
      help="The base network's weights from FILE (a .params file in the layout of GluonCV's "
           "ImageNet bases, e.g. weights/mobilenet0.25_shapes.params) instead of the model "
           "store's ImageNet file.")
    a('--tensorboard', type=str, default='',
      help='Write TensorBoard scalars to this folder (needs tensorboardX).')
    a('--no-plots', dest='plots', action='store_false',
      help="Draw neither {prefix}_curves.png nor {prefix}_val_samples.png, as GluonCV's script "
           '(matplotlib then never loads: 25-40 MiB less at the peak on the README job).')
    a('--model-dir', type=str, default=None,
      help='Where the final exported symbol+params go (default: beside --save-prefix).')
    a('--preset', type=str, default='', choices=[''] + sorted(PRESETS),
      help="Defaults of a GluonCV model-zoo training command ({}); arguments given on the "
           "command line still win.".format(', '.join(sorted(PRESETS))))
    return p


def parse_args(argv=None):
    """Parse the YOLOv3 recipe's arguments.

    Parameters
    ----------
    argv : list of str, optional
        Defaults to ``sys.argv[1:]``; pass a list from a notebook, e.g.
        ``parse_args(['--network', 'mobilenet0.25', '--gpus', ''])``.

    Returns
    -------
    argparse.Namespace
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.preset:
        # a preset only changes defaults, so a second parse lets explicit arguments win
        parser.set_defaults(**PRESETS[args.preset])
        args = parser.parse_args(argv)
    if args.dataset.lower() not in DATASETS:
        raise SystemExit('--dataset {!r} is not supported; choose one of {}'.format(
            args.dataset, ', '.join(DATASETS)))
    return args


def check_common(args, cpu, num_devices, world_size=1, backend='MXNet'):
    """Refuse, before anything is built, the combinations that would hang or crash mid-run.

    Parameters
    ----------
    args : argparse.Namespace
    cpu : bool
        Training on the CPU.
    num_devices : int
        Devices (contexts) one process splits its batch over.
    world_size : int
        Processes (Horovod / torchrun) sharing the global ``--batch-size``.
    backend : str
        Named in the messages.

    Raises
    ------
    ValueError
        ``--syncbn`` on several CPU contexts (MXNet's SyncBatchNorm deadlocks at the first
        backward), ``--amp`` on CPU (MXNet: no FP16 GEMM, bf16 breaks YOLOv3's Concat; PyTorch:
        float16 only; ``--amp-dtype bfloat16`` runs there), a torch-only switch on MXNet,
        ``--amp-dtype bfloat16`` without ``--amp``, ``--cudnn-benchmark`` on the CPU, ``--network``
        not a YOLOv3 base, batch sizes that cannot be split (over the contexts, or over the
        ``comm.world_size`` Horovod processes), a ``--start-epoch`` that trains nothing, a
        ``--num-samples`` of 0, a ``--save-prefix`` / ``--model-dir`` under an existing file.
    """
    if getattr(args, 'synthetic_val_images', None) and args.dataset.lower() != 'synthetic':
        raise ValueError('--synthetic-val-images {} sizes the generated dataset\'s test split; '
                         '--dataset {} has its own: drop it, or use --dataset synthetic'.format(
                             args.synthetic_val_images, args.dataset))
    if args.network not in NETWORKS:
        raise ValueError('--network {!r} is not a YOLOv3 base network; choose one of {}'.format(
            args.network, ', '.join(NETWORKS)))
    if backend == 'MXNet' and args.syncbn and num_devices > 1 and cpu:
        raise ValueError('--syncbn with {} CPU contexts: MXNet SyncBatchNorm deadlocks across CPU '
                         'contexts at the first backward pass. Drop --syncbn (plain BatchNorm per '
                         'context) or train on GPUs with --gpus 0,1,...'.format(num_devices))
    _check_torch_switches(args, cpu, backend)
    if args.amp and cpu and not (backend != 'MXNet'
                                 and getattr(args, 'amp_dtype', 'float16') == 'bfloat16'):
        raise ValueError("--amp needs GPUs: MXNet AMP has no FP16 GEMM on CPU and bf16 breaks "
                         "YOLOv3's Concat. Drop --amp for CPU training." if backend == 'MXNet'
                         else '--amp needs GPUs for float16 (autocast with loss scaling on '
                         'CUDA); on the CPU add --amp-dtype bfloat16 or drop --amp')
    if world_size > 1 and args.batch_size % world_size:
        raise ValueError('--batch-size {} is the global batch of {} {} processes and must '
                         'be a multiple of it (each process trains batch_size // {})'.format(
                             args.batch_size, world_size,
                             'Horovod' if backend == 'MXNet' else 'torchrun', world_size))
    if args.num_samples == 0 or args.num_samples < -1:
        raise ValueError('--num-samples {}: give the number of training images (>= 1), or -1 '
                         'for all of them'.format(args.num_samples))
    if getattr(args, 'tensorboard', '') and not tensorboard_available():
        raise ValueError('--tensorboard {} needs tensorboardX, which is not installed: pip '
                         'install tensorboardX, or drop --tensorboard'.format(args.tensorboard))
    if args.start_epoch >= args.epochs:
        raise ValueError('--start-epoch {} is not below --epochs {}, so nothing would be '
                         'trained; lower --start-epoch or raise --epochs'.format(
                             args.start_epoch, args.epochs))
    for name, folder in (('--save-prefix', os.path.dirname(args.save_prefix)),
                         ('--model-dir', args.model_dir)):
        problem = output_dir_problem(folder) if folder else None
        if problem:
            raise ValueError('{} {}: {}; give a prefix in a folder (it is created if missing)'
                             .format(name, getattr(args, name[2:].replace('-', '_')), problem))
    # GluonCV's meaning of 0 for these two is "never" (``if args.log_interval and ...``):
    # kept, and said once so that a typo is never silent
    for flag, value, meaning in (('--log-interval', args.log_interval, 'no batch log lines'),
                                 ('--save-interval', args.save_interval,
                                  'no periodic {prefix}_NNNN_*.params snapshots (the best '
                                  'weights are still saved)')):
        if value == 0:
            warnings.warn('{} 0: {}'.format(flag, meaning), stacklevel=2)
    if args.batch_size < num_devices:
        raise ValueError('--batch-size {} is smaller than the {} contexts it is split across'
                         .format(args.batch_size, num_devices))


#: the switches only ``--backend torch`` honours: (attribute, the value that asks for it, the
#: flag, the rest of MXNet's one-line refusal)
TORCH_ONLY = (
    ('amp_dtype', 'bfloat16', '--amp-dtype bfloat16',
     "MXNet AMP here is GluonCV's float16 (amp.init())"),
    ('channels_last', True, '--channels-last', 'the Gluon convolutions here are NCHW only'),
    ('cudnn_benchmark', True, '--cudnn-benchmark',
     "MXNet already times cuDNN's algorithms for each shape (MXNET_CUDNN_AUTOTUNE_DEFAULT=1)"),
)


def _check_torch_switches(args, cpu, backend):
    """Refuse a torch-only switch on MXNet, ``--amp-dtype bfloat16`` without ``--amp`` and
    ``--cudnn-benchmark`` on the CPU, each in one line (an argument is honoured or refused)."""
    if backend == 'MXNet':
        for name, value, flag, why in TORCH_ONLY:
            if getattr(args, name, None) == value:
                raise ValueError('{} is a --backend torch switch: {}; drop it or add --backend '
                                 'torch'.format(flag, why))
    if getattr(args, 'amp_dtype', 'float16') == 'bfloat16' and not args.amp:
        raise ValueError('--amp-dtype bfloat16 chooses the type of --amp, which is off: add '
                         '--amp or drop --amp-dtype')
    if getattr(args, 'cudnn_benchmark', False) and cpu:
        raise ValueError('--cudnn-benchmark tunes cuDNN, which only GPUs have: drop it for CPU '
                         'training')


def lr_decay_epochs(args):
    """Decay epochs from ``--lr-decay-period`` or ``--lr-decay-epoch``, minus the warm-up."""
    if args.lr_decay_period > 0:
        epochs = list(range(args.lr_decay_period, args.epochs, args.lr_decay_period))
    else:
        epochs = [int(i) for i in args.lr_decay_epoch.split(',')]
    return [e - args.warmup_epochs for e in epochs]


def lr_schedule(args, num_batches, scheduler, sequential):
    """GluonCV's LR schedule over ``num_batches`` updates per epoch: linear warm-up from 0
    over ``--warmup-epochs``, then ``--lr-mode`` with its decays (:func:`lr_decay_epochs`),
    built from the ``scheduler`` and ``sequential`` classes: gluoncv's ``LRScheduler`` /
    ``LRSequential`` (an MXNet optimizer's) or :mod:`gluontrain.core.lr_scheduler`'s.
    """
    return sequential([
        scheduler('linear', base_lr=0, target_lr=args.lr,
                  nepochs=args.warmup_epochs, iters_per_epoch=num_batches),
        scheduler(args.lr_mode, base_lr=args.lr, nepochs=args.epochs - args.warmup_epochs,
                  iters_per_epoch=num_batches, step_epoch=lr_decay_epochs(args),
                  step_factor=args.lr_decay, power=2),
    ])


def model_name(network, dataset):
    """``yolo3_<network>_<voc|coco|custom>`` (synthetic and custom data: ``custom``)."""
    suffix = dataset.lower() if dataset.lower() in ('voc', 'coco') else 'custom'
    return 'yolo3_{}_{}'.format(network, suffix)


def net_name(args):
    """:func:`model_name` of ``--network`` and ``--dataset``."""
    return model_name(args.network, args.dataset)


def reuse_pair_list(text):
    """``[(new, old)]`` of comma-separated ``new:old`` pairs, each a name or an index (int).

    Raises
    ------
    ValueError
        A pair without both sides, naming it.
    """
    pairs = []
    for pair in (p for p in text.split(',') if p.strip()):
        new, sep, old = (v.strip() for v in pair.partition(':'))
        if not sep or not new or not old:
            raise ValueError('{!r} is not a new:old pair; give e.g. car:car,truck:6'.format(
                pair))
        pairs.append(tuple(int(v) if v.isdigit() else v for v in (new, old)))
    return pairs


def reuse_pairs(text):
    """``--reuse-classes``: checked by :func:`reuse_pair_list`, kept as given
    (:func:`gluontrain.yolo3.transfer.reuse_spec` reads it)."""
    try:
        reuse_pair_list(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def check_weight_files(args, fix):
    """Refuse a missing or folder ``--resume`` / ``--load-weights`` before the data is read
    (:func:`gluontrain.core.argtypes.check_input_file`; ``fix`` ends the message), and both
    given at once: each decides the starting weights, and applying both trained a mixture."""
    if args.transfer.strip() and args.load_weights.strip():
        raise ValueError('--transfer {} and --load-weights {} both give the starting weights: '
                         '--transfer fine-tunes another model to these classes, --load-weights '
                         'starts from weights of this very network; give one of them'.format(
                             args.transfer.strip(), args.load_weights.strip()))
    if args.resume.strip() and args.load_weights.strip():
        raise ValueError('--resume {} and --load-weights {} both give the starting weights: '
                         '--resume continues a run from its checkpoint (weights included), '
                         '--load-weights starts a new run from a weights file; give one of '
                         'them'.format(args.resume.strip(), args.load_weights.strip()))
    base = getattr(args, 'pretrained_base', '').strip()
    if base and args.no_pretrained_base:
        raise ValueError('--pretrained-base {} and --no-pretrained-base contradict each other: '
                         'give one of them'.format(base))
    if base and args.transfer.strip():
        raise ValueError('--pretrained-base {} with --transfer {}: the transferred model gives '
                         'the base too; drop --pretrained-base'.format(base, args.transfer.strip()))
    base_fix = 'give the .params file of a base network, or drop the argument'
    for argument, path, what_to_do in (('--resume', args.resume.strip(), fix),
                                       ('--load-weights', args.load_weights.strip(), fix),
                                       ('--pretrained-base', base, base_fix)):
        if path:
            check_input_file(path, argument, what_to_do)
    transfer = args.transfer.strip()
    if transfer and transfer not in model_store.SHA1:
        check_input_file(transfer, '--transfer', 'give a model-zoo name ({}) or a .params file'
                         .format(', '.join(n for n in sorted(model_store.SHA1)
                                           if n.startswith('yolo3_'))))


def class_names(text):
    """The names of a comma-separated ``--classes`` (spaces and empty entries dropped),
    refusing a name given twice: two outputs would train on one label.

    Raises
    ------
    ValueError
    """
    names = [c.strip() for c in text.split(',') if c.strip()]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError('--classes {} names {} twice; give each class once, in training '
                         'order'.format(text, ', '.join(twice)))
    return names


def check_resume_position(next_epoch, args, path):
    """Refuse a ``--resume`` of a run that already trained its ``--epochs`` (it would train
    nothing and exit 0 without a word, where ``--start-epoch >= --epochs`` is refused).

    Raises
    ------
    ValueError
    """
    if next_epoch >= args.epochs:
        raise ValueError('--resume {}: that run already trained {} epochs and --epochs is {}, '
                         'so nothing would be trained; raise --epochs to train on (e.g. '
                         '--epochs {})'.format(path, next_epoch, args.epochs, next_epoch + 10))


def saved_args(saved):
    """A checkpoint's ``args`` with what runs before an argument existed used:
    ``anchors`` GluonCV's (compared by ``resume_changes`` with :data:`RESUME_MUST_MATCH`)."""
    return dict({'anchors': GLUONCV_ANCHORS_TEXT}, **dict(saved or {}))


def weights_to_load(args, kind_of):
    """The weights file ``main`` loads before training and its argument: ``--load-weights``,
    else a ``--resume`` that ``kind_of(path)`` (the backend's reading of
    :func:`gluontrain.core.checkpoint.file_kind`) does not call a full checkpoint, which is
    the reference's weights-only resume (warned); ``''`` for neither.

    Returns
    -------
    (str, str)
    """
    load, resume = args.load_weights.strip(), args.resume.strip()
    if not load and resume and kind_of(resume) != CHECKPOINT:
        warnings.warn('--resume {} loads weights only; a full resume needs the '
                      '{{prefix}}_last.ckpt checkpoint'.format(resume))
        return resume, '--resume'
    return load, '--load-weights'
