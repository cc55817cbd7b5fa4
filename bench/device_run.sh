#!/bin/bash
# The one command for a lent GPU machine (issue 25, item 6), from the repository root:
#   bash bench/device_run.sh
# Installs the carried wheels in .whl/ (yacs, pycocotools, pytest and its dependencies: see
# docs/performance.md "On a GPU" for the pip download line), prints the GPU and the versions,
# runs bench/cuda_recipes.py under a hard timeout and leaves results.json, results.md and
# device_run.log in $OUT (bench_out without it), zoo_scale's in $OUT/zoo_scale. About 9 minutes.
set -u
OUT=${OUT:-bench_out}
mkdir -p "$OUT"
exec > >(tee "$OUT/device_run.log") 2>&1
export PYTHONPATH=$PWD
if ls .whl/*.whl > /dev/null 2>&1; then
    site=$(mktemp -d)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" .whl/*.whl && export PYTHONPATH=$site:$PWD
fi
nvidia-smi
python3 - <<'PY'
import importlib
for name in ('torch', 'torchvision', 'numpy', 'cv2', 'h5py', 'yacs', 'pycocotools', 'pytest'):
    try:
        m = importlib.import_module(name)
        print(name, getattr(m, '__version__', '?'), m.__file__)
    except Exception as e:  # the bench says which section needs it
        print(name, 'NOT IMPORTABLE:', e)
import torch
print('cuda', torch.version.cuda, 'available', torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')
PY
# issue 44's GPU lines: first YOLOv3 at zoo scale (darknet53, 416 px, per-GPU batch 32,
# real-size JPEGs, random shapes: images/s fp32 / float16 / bfloat16, data wait, projected zoo
# hours), then every recipe (the two-stage ones with and without torchvision's kernels, the
# sync count of the yolo3-torch step); the two timeouts keep one command under 10 minutes
timeout -k 10 ${ZOO_TIMEOUT:-200} python3 bench/zoo_scale.py --device cuda --out "$OUT/zoo_scale"
zoo_rc=$?
timeout -k 10 ${BENCH_TIMEOUT:-320} python3 bench/cuda_recipes.py --device cuda \
    --budget ${BENCH_BUDGET:-290} --out "$OUT"
rc=$?
echo "zoo_scale exit status $zoo_rc"
nvidia-smi --query-gpu=name,memory.used,memory.total,temperature.gpu,clocks.sm --format=csv
echo "bench exit status $rc; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $rc
