#!/usr/bin/env bash
# The CI suite (.ci/run, a clean clone of HEAD) run ROUNDS times in a row while other
# processes keep the CPU busy, to show that no test depends on thread or wall-clock timing.
#
#   bash benchmarks/tools/ci_under_load.sh [ROUNDS] [BURNERS]      # defaults 3 and 1
#
# The load: BURNERS processes spinning in a Python busy loop (each takes one core) at the
# same priority as the suite, for the whole time.  Each round prints its exit status and
# wall time; the pytest summary line of each is in $LOG_DIR/round_<i>.log.  Exit status:
# the number of failed rounds.
set -u
ROUNDS="${1:-3}"; BURNERS="${2:-1}"
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="$(mktemp -d /tmp/ci_under_load.XXXXXX)"; LOG_DIR="${LOG_DIR:-$WORK}"
git clone -q "$REPO" "$WORK/clone" || exit 1
pids=()
for _ in $(seq "$BURNERS"); do python3 -c "while True: pass" & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
echo "clone of $(git -C "$REPO" rev-parse --short HEAD) in $WORK/clone; $BURNERS busy-loop process(es) beside the suite; $(nproc) cores"
failed=0
for i in $(seq "$ROUNDS"); do
    start=$(date +%s)
    (cd "$WORK/clone" && git clean -qfdx -e .ci && .ci/run) > "$LOG_DIR/round_$i.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || failed=$((failed + 1))
    echo "round $i: exit $rc, $(( $(date +%s) - start )) s: $(grep -E '(passed|failed|error)' "$LOG_DIR/round_$i.log" | tail -n 1)"
done
exit $failed
