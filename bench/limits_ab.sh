#!/usr/bin/env bash
# What limits cost a burst (issue 38): bench/e2e without any limit, with the
# burst's formation at max_running 100000 (bench/limits/max_running.sql) and
# with a quota for its owner that never binds (bench/limits/quota.sql),
# alternated ROUNDS times so that the machine's drift falls on all three.
# Prints each run's jobs/s and, per variant, the mean and its ratio to the
# runs without a limit. Extra arguments go to bench/e2e (default --quick).
#
#   bench/limits_ab.sh [ROUNDS] [bench/e2e options...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-2}
[ $# -gt 0 ] && shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--quick --seconds 1)
declare -A sum
for r in $(seq 1 "$rounds"); do
  for v in none max_running quota; do
    sql=()
    [ "$v" = none ] || sql=(--sql "$here/limits/$v.sql")
    line=$("$here/e2e" --no-peer --json "${args[@]}" "${sql[@]}" | tail -1)
    tput=$(sed -n 's/.*"throughput_jobs_per_s":\([0-9.]*\).*/\1/p' <<<"$line")
    us=$(sed -n 's/.*"pg_cpu_us_per_job":\([0-9.]*\).*/\1/p' <<<"$line")
    echo "round $r $v: $tput jobs/s, $us us of PostgreSQL a job"
    sum[$v]=$(echo "${sum[$v]:-0} + $tput" | bc -l)
  done
done
for v in none max_running quota; do
  mean=$(echo "${sum[$v]} / $rounds" | bc -l)
  ratio=$(echo "${sum[$v]} / ${sum[none]}" | bc -l)
  printf '%-12s mean %8.0f jobs/s  ratio to none %.3f\n' "$v" "$mean" "$ratio"
done
