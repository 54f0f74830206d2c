#!/usr/bin/env bash
# What 300,000 jobs parked for a future not_before cost a formation's pass
# (issue 34): runs a scheduler pass's two reads of pending jobs (the claim of
# schedulerd/store.sql schedulerd_read_pending and the formation pick of
# schedulerd_formations_to_work, copied here: keep them in step) against a formation with
# 1,000 ready jobs, first alone, then beside PARKED jobs of the same
# formation waiting an hour. Prints each query's execution time (median of
# RUNS, from EXPLAIN ANALYZE) and buffers read, for both cases.
#   bench/parked_rows.sh [PARKED] [RUNS]      (defaults 300000 15; needs jq)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
parked=${1:-300000}; runs=${2:-15}
build=${PGFLEET_BUILD_DIR:-$root/build}
[ -x "$build/pgfleet" ] || { echo "build pgfleet first (cmake --build build)" >&2; exit 1; }
source "$root/scripts/pg-fixture.sh"
tmp=$(mktemp -d /tmp/pgfleet-parked.XXXXXX); chmod 755 "$tmp"
cleanup() { pg_fixture_stop "$tmp/pg"; rm -rf "$tmp"; }
trap cleanup EXIT
pg_fixture_start "$tmp/pg" >/dev/null
psql "$PG_FIXTURE_DSN" -qc "create database bench"
dsn="host=127.0.0.1 port=$PG_FIXTURE_PORT user=postgres dbname=bench"
"$build/pgfleet" migrate --db "$dsn" >/dev/null
q() { psql "$dsn" -Atqc "$1"; }
q "insert into pgfleet.jobs (command, formation) select '{true}', 'f' from generate_series(1, 1000)"
fid=$(q "select id from pgfleet.formations where name = 'f'")

claim="select * from (
 (select j.id, j.cpu, j.memory, j.priority, j.constraints::text as constraints, j.privileged, coalesce(j.error, '') as reason
    from pgfleet.jobs j where j.formation = 'f' and j.state = 'pending' and j.desired_state = 'run' and j.not_before is null
   order by j.priority desc, j.id limit 500)
 union all
 (select j.id, j.cpu, j.memory, j.priority, j.constraints::text as constraints, j.privileged, coalesce(j.error, '') as reason
    from pgfleet.jobs j where j.state = 'pending' and j.not_before is not null and j.not_before <= now()
     and j.formation = 'f' and j.desired_state = 'run'
   order by j.priority desc, j.id limit 500)) c order by c.priority desc, c.id limit 500"
pick="select f.id from pgfleet.formations f left join lateral (select greatest(
   (select max(j.priority) from pgfleet.jobs j where j.formation = f.name and j.state = 'pending' and j.desired_state = 'run' and j.not_before is null),
   (select max(j.priority) from pgfleet.jobs j where j.state = 'pending' and j.not_before is not null and j.not_before <= now()
     and j.formation = f.name and j.desired_state = 'run')) as p) m on true
 where f.id = $fid and m.p is not null"

measure() {  # label query
  local times=() buffers=""
  for _ in $(seq "$runs"); do
    local plan
    plan=$(q "explain (analyze, buffers, format json) $2")
    times+=("$(jq -r '.[0]."Execution Time"' <<<"$plan")")
    buffers=$(jq -r '.[0].Plan."Shared Hit Blocks" + .[0].Plan."Shared Read Blocks"' <<<"$plan")
  done
  local median
  median=$(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '%-34s %10.3f ms  %8s buffers\n' "$1" "$median" "$buffers"
}

q "vacuum analyze pgfleet.jobs"
measure "claim, no parked rows" "$claim"
measure "formation pick, no parked rows" "$pick"
q "insert into pgfleet.jobs (command, formation, not_before)
   select '{true}', 'f', now() + interval '1 hour' from generate_series(1, $parked)"
q "vacuum analyze pgfleet.jobs"
measure "claim, $parked parked" "$claim"
measure "formation pick, $parked parked" "$pick"
