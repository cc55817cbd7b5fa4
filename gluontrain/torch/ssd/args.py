"""Arguments of the SSD300 recipe: ssd.pytorch's ``train.py`` ones (same names, same defaults)
and gluontrain's additions for the common interface and small CPU runs."""
import argparse

from ...core.argtypes import (finite_non_negative_float, int_list, non_negative_int,
                               positive_float, positive_int, resolve_local_rank)
from .config import coco, voc

# the argument naming where outputs go, for the CLI's messages about unwritable files
OUTPUT_ARGUMENT = '--save_folder'


class SSDArgs(argparse.Namespace):
    """The parsed arguments, with the config dict derived from them.

    ``cfg`` is ssd.pytorch's ``voc`` or ``coco`` dict for ``--dataset``: computed from the
    arguments when read, never written into them by ``get_dataset`` (a caller may set it
    explicitly to train with another config).
    """

    @property
    def cfg(self):
        """The config dict of ``self.dataset`` (or the one a caller set): ssd.pytorch's
        ``voc`` or ``coco``."""
        override = self.__dict__.get('_cfg')
        if override is not None:
            return override
        if self.dataset not in ('VOC', 'COCO'):
            raise ValueError('--dataset {!r}: choose VOC or COCO'.format(self.dataset))
        return voc if self.dataset == 'VOC' else coco

    @cfg.setter
    def cfg(self, value):
        self.__dict__['_cfg'] = value

    def _get_kwargs(self):
        # the log header and the checkpoint list the arguments, not the derived config
        return [(k, v) for k, v in super()._get_kwargs() if k != '_cfg']


def str2bool(v):
    """ssd.pytorch's boolean parsing: yes/true/t/1 (any case) are true, anything else false."""
    return str(v).lower() in ('yes', 'true', 't', '1')


def build_parser():
    """The argparse parser."""
    p = argparse.ArgumentParser(
        description='Single Shot MultiBox Detector Training With Pytorch')
    a = p.add_argument
    a('--dataset', default='VOC', choices=['VOC', 'COCO'], type=str, help='VOC or COCO')
    a('--dataset_root', default=None,
      help='Dataset root directory path (VOC: the VOCdevkit folder; COCO: the folder with '
           'annotations/). Default ~/data/VOCdevkit/ or ~/data/coco/ as ssd.pytorch.')
    a('--basenet', default='vgg16_reducedfc.pth',
      help="Pretrained base model; '' starts the VGG base from scratch (Kaiming-normal "
           'convs, as torchvision initialises VGG; extras and heads Xavier as the reference)')
    a('--batch_size', default=32, type=positive_int, help='Batch size for training')
    a('--resume', default=None, type=str,
      help='A full checkpoint (as *_last.ckpt) to resume exactly, or a state_dict (as .pth) '
           'to load as weights (the reference behaviour) and continue at --start_iter; the '
           "file's content decides, not its name")
    a('--start_iter', default=0, type=non_negative_int, help='Resume training at this iter')
    a('--num_workers', default=4, type=non_negative_int,
      help='Number of workers used in dataloading')
    a('--cuda', default=True, type=str2bool, help='Use CUDA to train model')
    a('--lr', '--learning-rate', default=1e-3, type=finite_non_negative_float,
      help='initial learning rate')
    a('--momentum', default=0.9, type=finite_non_negative_float,
      help='Momentum value for optim')
    a('--weight_decay', default=5e-4, type=finite_non_negative_float,
      help='Weight decay for SGD')
    a('--gamma', default=0.1, type=finite_non_negative_float, help='Gamma update for SGD')
    a('--visdom', default=False, type=str2bool,
      help='Use visdom for loss visualization (true is refused: gluontrain draws no visdom '
           'plots; use --tensorboard)')
    a('--save_folder', default='weights/', help='Directory for saving checkpoint models')
    # gluontrain additions
    a('--max_iter', default=None, type=positive_int, help="Override the config's max_iter")
    a('--lr_steps', default=None, type=int_list,
      help="Override the config's lr_steps, e.g. '80000,100000,120000'")
    a('--save_interval', default=5000, type=non_negative_int,
      help='Save the weights (ssd300_{dataset}_{N}.pth, a state_dict) every N iterations '
           '(reference: 5000; 0: none); the full checkpoint *_last.ckpt is written at the end '
           'of every pass over the data')
    a('--val_interval', default=0, type=non_negative_int,
      help='VOC07 mAP on the test split every N iterations (0: only after the last one)')
    a('--log_interval', default=10, type=non_negative_int,
      help='Log every N iterations (reference: 10; 0: no log lines)')
    a('--width_mult', default=1.0, type=positive_float,
      help='Divide every VGG/extra/head channel count by 1/width_mult (small CPU runs; '
           'the state_dict keys stay those of ssd.pytorch)')
    a('--batch_norm', default=False, type=str2bool,
      help='VGG16 base with BatchNorm after each conv (for training from scratch with '
           "--basenet ''; its vgg.* keys differ from ssd.pytorch's)")
    a('--seed', default=None, type=non_negative_int,
      help='Seed python, numpy and torch (reference: none)')
    a('--tensorboard', default='', type=str, help='TensorBoard folder (needs tensorboardX)')
    a('--plots', default=True, type=str2bool,
      help='The curves and validation samples pictures (ours; false: none drawn, and '
           'matplotlib is never imported)')
    a('--amp', action='store_true',
      help='Mixed precision on CUDA: float16 autocast + GradScaler (the reference trains in '
           'fp32). Refused on the CPU: bfloat16 autocast does not hold the fp32 loss curve '
           '(bench/ssd_amp.py)')
    a('--local_rank', '--local-rank', dest='local_rank', type=int, default=None,
      help='Device index of this process under torch.distributed.launch (default: '
           '$LOCAL_RANK, which torchrun sets, else 0)')
    a('--syncbn', action='store_true',
      help='With --batch_norm true under torchrun on CUDA: SyncBatchNorm (batch statistics over '
           'all processes). Refused on the CPU, where torch has no SyncBatchNorm')
    a('--persistent_workers', default=False, type=str2bool,
      help='Keep the --num_workers loader processes alive between passes over the data '
           '(saves their restart each pass; off by default because a resumed run then '
           "no longer replays the workers' augmentation draws exactly)")
    return p


def parse_args(argv=None):
    """Parse the SSD recipe's arguments (``argv`` defaults to ``sys.argv[1:]``).

    ``local_rank`` comes from ``--local_rank``/``--local-rank`` (``torch.distributed.launch``),
    else ``$LOCAL_RANK`` (``torchrun``), else 0.
    """
    parser = build_parser()
    args = parser.parse_args(argv, namespace=SSDArgs())
    resolve_local_rank(args, parser)
    return args
