#!/usr/bin/env bash
# Compile time (SPEC §1, issue "Make room for the next wings"): CPU seconds and peak memory to
# compile a trainer's translation unit (benchmarks/compile_time/trainer_tu.cpp: a five-node
# pipeline and a loader with worker processes, through <dpipe/dpipe.hpp>) at -O2, beside an empty
# translation unit, the best of N runs. Usage: benchmarks/compile_time.sh [N] [compiler]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
cxx=${2:-${CXX:-g++}}
flags=(-std=c++20 -O2 -Iinclude -c -o /dev/null)

measure() {  # prints "<best user+sys seconds> <peak KB>" over $runs compilations of $1
  local best="" peak=0
  for _ in $(seq "$runs"); do
    local out
    out=$( { /usr/bin/time -f "%U %S %M" "$cxx" "${flags[@]}" "$1"; } 2>&1 | tail -1)
    read -r user sys kb <<<"$out"
    local cpu
    cpu=$(echo "$user + $sys" | bc)
    if [ -z "$best" ] || [ "$(echo "$cpu < $best" | bc)" -eq 1 ]; then best=$cpu; fi
    [ "$kb" -gt "$peak" ] && peak=$kb
  done
  echo "$best $peak"
}

read -r empty_cpu empty_kb < <(measure benchmarks/compile_time/empty_tu.cpp)
read -r tu_cpu tu_kb < <(measure benchmarks/compile_time/trainer_tu.cpp)
lines=$("$cxx" -std=c++20 -Iinclude -E benchmarks/compile_time/trainer_tu.cpp | wc -l)
echo "Compile time ($cxx -O2, best of $runs): empty TU ${empty_cpu} s CPU, $((empty_kb / 1024)) MB"
echo "  trainer TU (5-node pipeline, loader with worker processes): ${tu_cpu} s CPU, $((tu_kb / 1024)) MB, $lines preprocessed lines"
echo "Compile time result: ${tu_cpu} s CPU for the trainer TU (target <= 5 s), $(echo "$tu_cpu - $empty_cpu" | bc) s above an empty TU"
