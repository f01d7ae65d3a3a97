#!/usr/bin/env bash
# Runs SPIN over mpsc_queue.pml: the safety search (assertions, end states) and the
# liveness search (non-progress cycles under weak fairness) must find no error in the
# queue, and both must find the bug in its mutant. Usage: check_model.sh MODEL WORKDIR
set -euo pipefail
model=$1 work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work"
run() {  # run LABEL SPIN_FLAGS -> prints the error count of safety and liveness
  rm -f pan pan.* panl
  spin $2 -a "$model" >/dev/null
  gcc -O2 -DSAFETY -o pan pan.c
  gcc -O2 -DNP -o panl pan.c
  local s l
  s=$(./pan -m100000 | tee "$1.safety.txt" | sed -n 's/.*errors: \([0-9]*\).*/\1/p')
  l=$(./panl -m100000 -l -f | tee "$1.liveness.txt" | sed -n 's/.*errors: \([0-9]*\).*/\1/p')
  states=$(sed -n 's/^ *\([0-9]*\) states, stored.*/\1/p' "$1.safety.txt")
  echo "$1: safety errors $s, liveness errors $l ($states states)"
  eval "${1}_s=$s ${1}_l=$l"
}
run queue ""
run mutant "-DMUTANT"
if [ "$queue_s" != 0 ] || [ "$queue_l" != 0 ]; then
  echo "FAIL: the model checker found an error in the queue (see $work/queue.*.txt)"; exit 1
fi
if [ "$mutant_s" = 0 ] && [ "$mutant_l" = 0 ]; then
  echo "FAIL: the model checker missed the mutant's bug"; exit 1
fi
echo "OK: every interleaving of 2 producers x 2 elements and 1 consumer delivers each element once, in order"
