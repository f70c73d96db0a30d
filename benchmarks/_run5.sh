set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD"
timeout 200 python3 -m pytest -q tests/fmm/test_evaluator_gpu.py -k adaptive -x 2>&1 | grep -E "^E  |^FAILED|passed|failed|Error|error" | head -20
B="timeout 150 python3 benchmarks/bench_fmm.py --direct-max-pairs 1e10"
S='import json,sys
for l in sys.stdin:
    if l.startswith("{"):
        r=json.loads(l); st=r["stages"]; print(r["case"],r["tree"],r["leaf_size"],"P",r["order"],"d",r["depth"],"err %.2e %.2e"%(r["err_u"],r["err_grad"]),"%.1f ms"%(r["time_s"]*1e3), {k:round(v*1e3,1) for k,v in st.items() if k in ("tree","near","p2m","m2m","m2l","l2l","l2p")})
    elif "Error" in l or "error" in l: print(l.rstrip())'
for ls in 256 512 1024; do $B --tree adaptive --leaf-size $ls --cases clustered-gauss-1e-6-local --out $OUT/ad$ls.json 2>&1 | python3 -c "$S"; done
$B --tree adaptive --cases uniform-gauss-1e-6 rings-gauss-1e-6 --out $OUT/ad_other.json 2>&1 | python3 -c "$S"
