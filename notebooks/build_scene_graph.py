"""Build notebooks/scene_graph.ipynb from the cells below.

Run: python notebooks/build_scene_graph.py --execute (runs it headless and stores it with its
outputs, as committed; see nbbuild.py). The notebook walks through Scene-Graph-Benchmark's
relation training (PredCls with MOTIFS) with gluontrain's 'sgg' recipe; tests/test_notebooks.py
executes it and checks that the committed outputs are still what the cells produce.
"""
import os

from nbbuild import main  # pylint: disable=import-error

HERE = os.path.dirname(os.path.abspath(__file__))

CELLS = [
    ('md', """# Scene graphs, step by step (Scene-Graph-Benchmark's `relation_train_net.py` through gluontrain)

A scene graph is a set of `subject - predicate - object` triplets over the boxes of an image.
Scene-Graph-Benchmark (SGB) trains a relation head on top of a detector; in **PredCls** the
boxes and their labels are given and only the predicates are learnt. This notebook draws
generated Visual Genome data and its graphs, the predicate frequency statistics SGB's
frequency bias is made of, trains MOTIFS for a short while on the CPU with the shipped config
(`gluontrain/torch/sgg/configs/predcls_motifs_cpu.yaml`), prints SGB's recalls on the held-out
test split next to the frequency-only baseline, and draws predicted graphs."""),
    ('code', """import logging
import os
os.environ.setdefault('OMP_NUM_THREADS', '1')
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Image, display
from PIL import Image as PILImage

from gluontrain.core.plots import read_metrics
from gluontrain.data.vg import write_vg
from gluontrain.torch.sgg import inference, recipe, trainer
from gluontrain.torch.sgg.baseline import frequency_baseline
from gluontrain.torch.sgg.config import CONFIGS_DIR, load_cfg
from gluontrain.torch.sgg.data.build import build_dataset
from gluontrain.torch.sgg.data.statistics import get_dataset_statistics
from gluontrain.torch.sgg.evaluation.vg_eval import do_vg_evaluation
from gluontrain.torch.sgg.plots import (draw_scene_graph, draw_scene_graphs,
                                        ground_truth_triplets, samples_from_dataset)
from gluontrain.torch.step import seed_all

%matplotlib inline
torch.set_num_threads(1)
# a fresh folder made the current one: paths below, and those printed, are relative to it
os.chdir(tempfile.mkdtemp(prefix='scene_graph_'))
WORK = '.'
QUIET = logging.getLogger('notebook')  # SGB's gradient-norm and evaluation logs stay out
QUIET.setLevel(logging.WARNING)
print('working folder:', os.path.basename(os.getcwd()))"""),
    ('md', """## 1. Visual Genome data and its graphs

`write_vg` writes SGB's files (`VG-SGG-with-attri.h5`, `VG-SGG-dicts-with-attri.json`,
`image_data.json`, `VG_100K/`): shapes on noise with 12 spatial predicates. SGB's split rule:
h5 `split` 0 is train, the first `DATASETS.NUM_VAL_IM` usable train images are val, `split` 2
is test. The config is SGB's yacs config: the shipped file, then `KEY VALUE` overrides."""),
    ('code', """root = write_vg(os.path.join(WORK, 'vg'), num_train=100, num_val=25, seed=0)
OUT = os.path.join(WORK, 'predcls')
cfg = load_cfg(os.path.join(CONFIGS_DIR, 'predcls_motifs_cpu.yaml'),
               ['OUTPUT_DIR', OUT, 'SOLVER.MAX_ITER', '100', 'SOLVER.STEPS', '(80,)',
                'SOLVER.VAL_PERIOD', '50',
                'SOLVER.CHECKPOINT_PERIOD', '100', 'INPUT.MIN_SIZE_TRAIN', '(128,)',
                'INPUT.MAX_SIZE_TRAIN', '224', 'INPUT.MIN_SIZE_TEST', '128',
                'INPUT.MAX_SIZE_TEST', '224'], data_dir=root)
seed_all(cfg.SEED)
train_ds, val_ds, iou_types = recipe.get_dataset(None, cfg)
print('train {} / val {} images; classes {}; predicates {}'.format(
    len(train_ds), len(val_ds), train_ds.ind_to_classes[1:], train_ds.ind_to_predicates[1:]))
assert (len(train_ds), len(val_ds)) == (75, 20)  # 5 train images have no relation"""),
    ('code', """fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), dpi=72)
for ax, i in zip(axes, (0, 1)):
    gt = val_ds.get_groundtruth(i, evaluation=True)
    with PILImage.open(val_ds.filenames[i]) as im:
        image = np.asarray(im.convert('RGB'))
    triplets = ground_truth_triplets(gt)
    draw_scene_graph(ax, image, gt.bbox.numpy(), gt.get_field('labels').numpy(), triplets,
                     val_ds.ind_to_classes, val_ds.ind_to_predicates, ['cyan'] * len(triplets))
    ax.set_title('{} boxes, {} triplets'.format(len(gt), len(triplets)), fontsize=9)
    labels = gt.get_field('labels').tolist()
    print([(val_ds.ind_to_classes[labels[s]], val_ds.ind_to_predicates[p],
            val_ds.ind_to_classes[labels[o]]) for s, o, p, _ in triplets])
plt.tight_layout()
plt.show()"""),
    ('md', """## 2. Frequency statistics

SGB's `get_statistics` counts `fg_matrix[subject, object, predicate]` over the training split
(background: overlapping pairs without a relation) and gives the frequency bias
`pred_dist = log(fg / sum fg + 1e-3)`. Predicting the most frequent predicate of a
(subject, object) class pair is the baseline every model must beat. As in SGB, the statistics'
train split keeps only relations whose boxes overlap (`get_VG_statistics` builds it with
`filter_non_overlap=True`): here the spatial predicates between separate shapes (`above`,
`left of`, `far from`, ...) count 0, so MOTIFS' frequency bias starts them at `log(1e-3)`
and the model has to learn them against it."""),
    ('code', """stats = get_dataset_statistics(cfg)
fg = np.asarray(stats['fg_matrix'])
per_predicate = fg[:, :, 1:].sum((0, 1))
for name, n in sorted(zip(stats['rel_classes'][1:], per_predicate), key=lambda x: -x[1]):
    print('{:12s} {:4d}'.format(name, int(n)))
assert per_predicate.sum() > 0 and stats['pred_dist'].shape == (9, 9, 13)
fig, ax = plt.subplots(figsize=(6, 3.2), dpi=72)
best = np.asarray(stats['pred_dist'])[1:, 1:, 1:].argmax(-1)
ax.imshow(best, cmap='tab20', vmin=0, vmax=11)
ax.set_xticks(range(8)); ax.set_xticklabels(stats['obj_classes'][1:], rotation=60, fontsize=7)
ax.set_yticks(range(8)); ax.set_yticklabels(stats['obj_classes'][1:], fontsize=7)
for (s, o), p in np.ndenumerate(best):
    ax.text(o, s, stats['rel_classes'][p + 1][:6], ha='center', va='center', fontsize=5)
ax.set_title('most frequent predicate (row: subject, column: object)', fontsize=8)
plt.tight_layout()
plt.show()"""),
    ('md', """## 3. A short PredCls training

The recipe's functions, as `scripts/train_relation.py` runs them: SGB's loaders
(aspect-ratio groups, iteration-based), the relation model (its detector part frozen by
`fix_eval_modules`), `make_optimizer` (one group per parameter, rate times
`IMS_PER_BATCH`), `WarmupMultiStepLR`, `clip_grad_norm` at 5, validation every 50
iterations, `model_{iter:07d}.pth` / `model_final.pth` / `last_checkpoint` in `OUTPUT_DIR`.
100 iterations (the shipped CPU config's rate, 0.01) on images resized to 128-224 px (the
shipped config: 192-320) keep this walk-through under half a minute; longer runs score
higher."""),
    ('code', """device = torch.device('cpu')
net, model = recipe.get_net(cfg, [device])
train_data, val_data = recipe.get_dataloader(net, train_ds, val_ds, None, None, None, cfg)
frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
print('{} batches of {} images; {} frozen and {} trained parameters'.format(
    len(train_data), cfg.SOLVER.IMS_PER_BATCH, frozen, trained))
assert len(train_data) == cfg.SOLVER.MAX_ITER and frozen > 0"""),
    ('code', """state = trainer.do_train(cfg, net, train_data, val_data, device, logger=QUIET)
print(state.stop_reason, sorted(f for f in os.listdir(OUT) if f.endswith('.pth')))
assert state.iteration == 100"""),
    ('code', """records = read_metrics(os.path.join(OUT, 'sgg_metrics.jsonl'))
print({k: round(v, 3) for k, v in records[-1]['loss_epoch'].items()})
display(Image(filename=os.path.join(OUT, 'sgg_curves.png')))"""),
    ('md', """## 4. Recalls on the held-out test split

SGB's evaluation (`do_vg_evaluation`): R@K with the graph constraint (one predicate per
pair), ngR@K without it, mR@K averaged over predicates, zR@K on triplets never seen in
training. The frequency baseline scores the same pairs with `softmax(pred_dist[s, o])`; the
untrained number is chance (about 5 boxes and 12 predicates per image)."""),
    ('code', """score, result = inference.test(cfg, net, train_ds, logger=QUIET)[0]
folder = os.path.join(OUT, 'inference', cfg.DATASETS.TEST[0])
saved = torch.load(os.path.join(folder, 'eval_results.pytorch'), weights_only=False)
test_ds = build_dataset(cfg, cfg.DATASETS.TEST, None, is_train=False)[0]
_, freq = do_vg_evaluation(cfg, test_ds, frequency_baseline(saved['predictions'],
                           stats['pred_dist']), None, QUIET, ('relations',),
                           return_result_dict=True)
for name, res in (('MOTIFS', result), ('frequency', freq)):
    print('{:10s}'.format(name), '  '.join('{} {:.4f}'.format(
        k, np.mean(res['predcls_' + key][50])) for k, key in
        (('R@50', 'recall'), ('ngR@50', 'recall_nogc'))),
        '  mR@50 {:.4f}'.format(float(res['predcls_mean_recall'][50])))
assert np.mean(result['predcls_recall'][50]) > np.mean(freq['predcls_recall'][50])"""),
    ('md', """## 5. Predicted scene graphs

Left: the model's ten best triplets (green: a ground-truth triplet, red: not); right: the
ground truth. The same picture is written at every validation
(`OUTPUT_DIR/scene_graphs/iter_*.png`)."""),
    ('code', """path = draw_scene_graphs(samples_from_dataset(test_ds, saved['predictions'], [0, 1]),
                         test_ds.ind_to_classes, test_ds.ind_to_predicates,
                         os.path.join(WORK, 'test_graphs.png'), top_k=10)
display(Image(filename=path))"""),
]


if __name__ == '__main__':
    main(CELLS, os.path.join(HERE, 'scene_graph.ipynb'))
