set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD"
timeout 420 python3 -m pytest -q tests/fmm/test_evaluator_gpu.py --durations=15 2>&1 | grep -E "^E  |^FAILED|passed|failed|Error|s call" | head -40
timeout 150 python3 benchmarks/bench_fmm.py --cases uniform-gauss-1e-9 uniform-singular-1e-9 rings-gauss-1e-9 --direct-max-pairs 1e10 --out $OUT/bench_fmm_1e-9.json 2>&1 | tail -12
