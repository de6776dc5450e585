#!/usr/bin/env bash
# Compile time (issue "Make room for the next wings"): CPU seconds and peak memory to compile a
# trainer's translation unit (benchmarks/compile_time/trainer_tu.cpp: a five-node pipeline and a
# loader with worker processes, through <dpipe/dpipe.hpp>) at -O2, beside an empty translation
# unit, the best of N runs. Usage: benchmarks/compile_time.sh [N] [compiler]
# Peak memory needs GNU time (/usr/bin/time, Debian's `time` package, which `make bench` installs).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
cxx=${2:-${CXX:-g++}}
flags=(-std=c++20 -O2 -Iinclude -c -o /dev/null)

measure() {  # prints "<best user+sys seconds> <peak MB>" over $runs compilations of $1
  local best="" peak=0 out cpu kb
  for _ in $(seq "$runs"); do
    if [ -x /usr/bin/time ]; then
      out=$( { /usr/bin/time -f "%U %S %M" "$cxx" "${flags[@]}" "$1"; } 2>&1 | tail -1)
      read -r cpu kb < <(awk '{printf "%.2f %d\n", $1 + $2, $3}' <<<"$out")
    else
      local TIMEFORMAT="%U %S"
      out=$( { time "$cxx" "${flags[@]}" "$1"; } 2>&1 | tail -1)
      cpu=$(awk '{printf "%.2f", $1 + $2}' <<<"$out")
      kb=0
    fi
    if [ -z "$best" ] || awk -v a="$cpu" -v b="$best" 'BEGIN {exit !(a < b)}'; then best=$cpu; fi
    [ "$kb" -gt "$peak" ] && peak=$kb
  done
  echo "$best $((peak / 1024))"
}

read -r empty_cpu empty_mb < <(measure benchmarks/compile_time/empty_tu.cpp)
read -r tu_cpu tu_mb < <(measure benchmarks/compile_time/trainer_tu.cpp)
lines=$("$cxx" -std=c++20 -Iinclude -E benchmarks/compile_time/trainer_tu.cpp | wc -l)
memory() { [ "$1" -gt 0 ] && echo "$1 MB" || echo "memory not measured (no /usr/bin/time)"; }
echo "Compile time ($cxx -O2, best of $runs): empty TU ${empty_cpu} s CPU, $(memory "$empty_mb")"
echo "  trainer TU (5-node pipeline, loader with worker processes): ${tu_cpu} s CPU, $(memory "$tu_mb"), $lines preprocessed lines"
echo "Compile time result: ${tu_cpu} s CPU for the trainer TU (target <= 5 s), $(awk -v a="$tu_cpu" -v b="$empty_cpu" 'BEGIN {printf "%.2f", a - b}') s above an empty TU"
