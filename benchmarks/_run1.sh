set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
echo "== pytest -m gpu"
timeout 330 python3 -m pytest -m gpu -q -x 2>&1 | grep -E "^E  |^FAILED|passed|failed|Error" | head -20
OC="timeout 60 python3 benchmarks/order_check.py"
echo "== wide, singular 1e-9"
$OC --kernel singular --tol 1e-9 --separation 2 --orders 13 15 --depths 4 5 --profile
echo "== wide, gaussian 1e-9"
$OC --kernel gaussian --tol 1e-9 --separation 2 --orders 14 16 --depths 4 5 --profile
$OC --kernel gaussian --tol 1e-9 --separation 2 --orders 14 16 --sigma-h 2 --profile
echo "== wide 1e-6"
$OC --kernel singular --tol 1e-6 --separation 2 --orders 9 10 --depths 4 5 --profile
$OC --kernel gaussian --tol 1e-6 --separation 2 --orders 10 11 --depths 4 --profile
$OC --kernel gaussian --tol 1e-6 --orders 16 --profile
echo "== wide, algebraic 1e-9"
timeout 120 python3 benchmarks/order_check.py --kernel algebraic --tol 1e-9 --separation 2 --orders 14 --profile
