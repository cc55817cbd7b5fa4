"""Scene-Graph-Benchmark's Visual Genome evaluation: recalls (R, ngR, zR, mR, A @ K) and
detection AP, with SGB's print format and ``result_dict`` keys."""
from .sgg_eval import (SGAccumulateRecall, SGMeanRecall, SGNGMeanRecall, SGNGZeroShotRecall,
                       SGNoGraphConstraintRecall, SGPairAccuracy, SGRecall, SGZeroShotRecall)
from .vg_eval import (do_vg_evaluation, evaluate_detection, evaluate_relations, relation_metrics)
from .zeroshot import (compute_zeroshot_triplets, load_or_compute_zeroshot_triplets,
                       load_zeroshot_triplets, save_zeroshot_triplets)

__all__ = ['SGRecall', 'SGNoGraphConstraintRecall', 'SGZeroShotRecall', 'SGNGZeroShotRecall',
           'SGPairAccuracy', 'SGMeanRecall', 'SGNGMeanRecall', 'SGAccumulateRecall',
           'do_vg_evaluation', 'evaluate_detection', 'evaluate_relations',
           'relation_metrics', 'compute_zeroshot_triplets', 'load_or_compute_zeroshot_triplets',
           'load_zeroshot_triplets', 'save_zeroshot_triplets']
