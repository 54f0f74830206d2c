#!/usr/bin/env bash
# Failover benchmark: how long after a host's last heartbeat do its jobs run
# elsewhere? Starts a throwaway PostgreSQL, one scheduler and two hosts
# (process driver), runs JOBS long jobs, kill -9s the host running them, and
# measures, by the database clock, from the victim's last heartbeat to the
# moment the last replacement attempt reported running. Prints one line per
# trial and a summary. Target: TTL + 1 s.
#   bench/failover.sh [TRIALS] [TTL_SECONDS] [JOBS]     (defaults 3 10 5)
set -euo pipefail
trials=${1:-3}; ttl=${2:-10}; jobs=${3:-5}
source "$(dirname "$0")/bench-fixture.sh"
bench_start failover
"$build/pgfleet-schedulerd" --db "$dsn" --token-file "$tmp/token" --host-ttl "$ttl" --tick 0.5 >"$tmp/s1.log" 2>&1 &
pids+=($!)
start_host() {
  "$build/pgfleet-hostd" --db "$dsn" --id "$1" --token-file "$tmp/token" --driver process --cpu 4000 --memory 4000 \
    --heartbeat-interval 1 --data-dir "$tmp/$1" >>"$tmp/$1.log" 2>&1 &
  pids+=($!)
  eval "pid_$1=$!"
}
start_host a; start_host b
sleep 2
for t in $(seq 1 "$trials"); do
  q "update pgfleet.formations set replicas = 0 where false" >/dev/null
  first=$(q "select coalesce(max(id), 0) from pgfleet.jobs")
  q "insert into pgfleet.jobs (command, formation) select array['sleep', '600'], 'failover$t' from generate_series(1, $jobs)" >/dev/null
  for _ in $(seq 1 100); do
    [ "$(q "select count(*) from pgfleet.jobs where id > $first and state = 'running'")" -eq "$jobs" ] && break
    sleep 0.1
  done
  victim=$(q "select host_id from pgfleet.jobs where id > $first group by host_id order by count(*) desc limit 1")
  eval "kill -9 \$pid_$victim"
  for _ in $(seq 1 $((ttl * 10 + 200))); do
    moved=$(q "select count(*) from pgfleet.jobs where id > $first and state = 'running' and host_id <> '$victim'")
    [ "$moved" -eq "$jobs" ] && break
    sleep 0.1
  done
  secs=$(q "select round(extract(epoch from (select max(e.at) from pgfleet.job_events e join pgfleet.jobs j on j.id = e.job_id
              where j.id > $first and e.kind = 'running' and e.host_id <> '$victim')
            - (select last_seen from pgfleet.host_heartbeats where host_id = '$victim'))::numeric, 2)")
  echo "trial $t: $jobs jobs of host $victim running elsewhere $secs s after its last heartbeat (ttl $ttl s; target <= $((ttl + 1)))"
  echo "$secs" >>"$tmp/results"
  # Clean up: stop the moved jobs, bring the victim back (it kills its superseded copies).
  q "select pgfleet.stop_jobs(array(select id from pgfleet.jobs where id > $first), 'bench trial over')" >/dev/null
  start_host "$victim"
  sleep 3
done
awk -v ttl="$ttl" '{s+=$1; if ($1>m) m=$1} END {printf "failover: mean %.2f s, max %.2f s after the last heartbeat (ttl %d s) over %d trials\n", s/NR, m, ttl, NR}' "$tmp/results"
