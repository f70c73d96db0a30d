set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD"
OC="timeout 90 python3 benchmarks/order_check.py --separation 2"
$OC --kernel gaussian --tol 1e-9 --orders 15 --depths 4 5
$OC --kernel gaussian --tol 1e-9 --orders 15 --sigma-h 2
$OC --kernel algebraic --tol 1e-9 --orders 15 16
$OC --kernel winckelmans --tol 1e-9 --orders 15
$OC --kernel polynomial --tol 1e-9 --orders 15
$OC --kernel gaussian --tol 1e-8 --orders 13 --depths 4 5
$OC --kernel algebraic --tol 1e-8 --orders 13
$OC --kernel gaussian --tol 1e-7 --orders 11 --depths 5
$OC --kernel algebraic --tol 1e-7 --orders 11
$OC --kernel gaussian --tol 1e-9 --orders 15 --n 4194304 --depths 5
