#!/usr/bin/env bash
# What health checks cost the database (issue 36): REPLICAS healthy service
# replicas on HOSTS hollow hosts (pgfleet-hostd --simulate; sim checks pass,
# hostd/hollow/sim.h), each checked every INTERVAL seconds. hostd reports a
# replica's health only when it changes, so once all are healthy the target
# is no writes beyond heartbeats. Prints, over WINDOW seconds after every
# replica became healthy, the rows inserted, updated and deleted per minute
# in each pgfleet table (pg_stat_user_tables deltas; a backend's counts reach
# them within 10 s, so the window's ends are each up to 10 s late), the job
# rows whose version changed, and the health events written. INTERVAL 0
# runs the same replicas without health checks: the baseline (heartbeats,
# live usage) the checks must add nothing to.
#   bench/health_writes.sh [REPLICAS] [HOSTS] [INTERVAL] [WINDOW]   (defaults 1000 100 10 60)
set -euo pipefail
replicas=${1:-1000}; hosts=${2:-100}; interval=${3:-10}; window=${4:-60}
source "$(dirname "$0")/bench-fixture.sh"
bench_start health
"$build/pgfleet-schedulerd" --db "$dsn" --token-file "$tmp/token" --log-level warn >"$tmp/s1.log" 2>&1 &
pids+=($!)
"$build/pgfleet-hostd" --db "$dsn" --token-file "$tmp/token" --simulate "$hosts" --id-prefix sim- \
  --cpu 100000 --memory 100000 --log-level warn >"$tmp/hollow.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  [ "$(q "select count(*) from pgfleet.host_status where alive")" -ge "$hosts" ] && break
  sleep 1
done
"$build/pgfleet" formation create web --db "$dsn" --kind service --replicas "$replicas" \
  --cpu 10 --memory 1 --env PGFLEET_SIM_SECONDS=1000000 \
  $([ "$interval" -gt 0 ] && echo --health-tcp 6379 --health-interval "$interval") \
  -- sleep 1000000 >/dev/null
ready=healthy; [ "$interval" -gt 0 ] || ready=running
start=$(date +%s)
until [ "$(q "select $ready from pgfleet.formation_status where name = 'web'")" = "$replicas" ]; do
  if [ $(( $(date +%s) - start )) -gt 600 ]; then
    echo "not all healthy after 600 s:" >&2; q "select to_jsonb(f) from pgfleet.formation_status f" >&2
    exit 1
  fi
  sleep 1
done
echo "replicas $replicas on $hosts hollow hosts, checked every ${interval}s (0: none): all $ready after $(( $(date +%s) - start ))s"
sleep 11  # what the last changes wrote reaches pg_stat_user_tables
snapshot() {
  q "select relname || ' ' || n_tup_ins || ' ' || n_tup_upd || ' ' || n_tup_del
       from pg_stat_user_tables where schemaname = 'pgfleet' order by relname"
}
versions="select md5(string_agg(id || ':' || xmin::text, ',' order by id)) from pgfleet.jobs"
before=$(snapshot); jobs_before=$(q "$versions")
events_before=$(q "select count(*) from pgfleet.job_events where kind = 'health'")
sleep "$window"
after=$(snapshot); jobs_after=$(q "$versions")
events_after=$(q "select count(*) from pgfleet.job_events where kind = 'health'")
echo "over ${window}s (per minute):"
printf '  %-22s %10s %10s %10s\n' table inserts updates deletes
join <(echo "$before") <(echo "$after") | awk -v w="$window" '
  { ins = ($5 - $2) * 60 / w; upd = ($6 - $3) * 60 / w; del = ($7 - $4) * 60 / w
    if (ins != 0 || upd != 0 || del != 0 || $1 == "jobs" || $1 == "job_events")
      printf "  %-22s %10.1f %10.1f %10.1f\n", $1, ins, upd, del }'
echo "  job rows rewritten: $([ "$jobs_before" = "$jobs_after" ] && echo none || echo some)"
echo "  health events written: $(( events_after - events_before ))"
