# Sourced by the device-machine scripts (gpu_check.sh, ab_gpu.sh): installs the wheels of
# .whl/ (carried to the device machine, docs/gpu.md) into /tmp/site and sets SITE to
# "/tmp/site:" (the Python path's prefix), or to "" when there are none.
SITE=""
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    SITE="/tmp/site:"
fi
