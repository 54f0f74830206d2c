#!/usr/bin/env bash
# Rolling-update benchmark: a service of REPLICAS sim replicas on HOSTS hollow
# hosts (one pgfleet-hostd --simulate process) and one scheduler; its
# template is changed and the rollout (max_parallel PARALLEL,
# min_healthy_time 1 s) runs to the end. Prints, by the database clock, how
# long the rollout took against its floor (rounds x min_healthy_time, rounds
# = REPLICAS / PARALLEL: no rollout can be faster), and the CPU the
# scheduler and PostgreSQL spent meanwhile (utime + stime from /proc), per
# replaced replica.
#   bench/rollout.sh [REPLICAS] [HOSTS] [PARALLEL]     (defaults 100 50 10)
set -euo pipefail
replicas=${1:-100}; hosts=${2:-50}; parallel=${3:-10}
source "$(dirname "$0")/bench-fixture.sh"
bench_start rollout
# CPU seconds (user + system) of a process, and of every PostgreSQL backend.
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
pg_cpu() {  # this benchmark's server only: its postmaster and its children
  local total=0 p postmaster
  postmaster=$(head -1 "$tmp/pg/data/postmaster.pid")
  for p in "$postmaster" $(pgrep -P "$postmaster" || true); do
    [ -r "/proc/$p/stat" ] || continue
    total=$(awk -v t="$total" -v hz="$(getconf CLK_TCK)" '{printf "%.2f", t + ($14 + $15) / hz}' "/proc/$p/stat")
  done
  echo "$total"
}
"$build/pgfleet-schedulerd" --db "$dsn" --token-file "$tmp/token" --id s1 --log-level warn >"$tmp/s1.log" 2>&1 &
sched=$!; pids+=($!)
"$build/pgfleet-hostd" --db "$dsn" --token-file "$tmp/token" --simulate "$hosts" --id-prefix sim- \
  --cpu 1000 --memory 4096 --db-connections 4 --log-level warn >"$tmp/hosts.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 240); do
  [ "$(q "select count(*) from pgfleet.host_heartbeats where last_seen > now() - interval '5 s'")" -ge "$hosts" ] && break
  sleep 0.5
done
q "insert into pgfleet.formations (name, kind, replicas, command, env, cpu, memory, max_parallel, min_healthy_time)
   values ('web', 'service', $replicas, '{serve}', '{\"PGFLEET_SIM_SECONDS\": \"86400\"}', 100, 64,
           '$parallel', '1 second')" >/dev/null
for _ in $(seq 1 600); do
  [ "$(q "select count(*) from pgfleet.jobs where formation = 'web' and state = 'running'")" -ge "$replicas" ] && break
  sleep 0.2
done
sleep 2  # every replica healthy for min_healthy_time
# The idle fleet's cost (heartbeats, ticks) over as long as the floor, to set against the rollout's.
i0=$(cpu_of "$sched"); j0=$(pg_cpu); idle_secs=$(( (replicas + parallel - 1) / parallel ))
sleep "$idle_secs"
i1=$(cpu_of "$sched"); j1=$(pg_cpu)
s0=$(cpu_of "$sched"); p0=$(pg_cpu)
q "update pgfleet.formations set env = env || '{\"VERSION\": \"2\"}' where name = 'web'" >/dev/null
for _ in $(seq 1 3000); do
  [ "$(q "select state from pgfleet.rollouts order by id desc limit 1")" = succeeded ] && break
  sleep 0.2
done
s1=$(cpu_of "$sched"); p1=$(pg_cpu)
state=$(q "select state from pgfleet.rollouts order by id desc limit 1")
secs=$(q "select round(extract(epoch from finished_at - started_at)::numeric, 2) from pgfleet.rollouts order by id desc limit 1")
rounds=$(( (replicas + parallel - 1) / parallel ))
replaced=$(q "select count(*) from pgfleet.job_events where kind = 'stop_requested' and detail = 'replaced by version 2'")
v2=$(q "select count(*) from pgfleet.jobs where formation = 'web' and version = 2")
echo "rollout of $replicas replicas on $hosts hollow hosts, max_parallel $parallel, min_healthy_time 1 s: $state"
echo "  time ${secs:-?} s by the database clock; floor $rounds s ($rounds rounds x 1 s): $(echo "scale=2; ${secs:-0} / $rounds" | bc) x the floor"
echo "  replaced $replaced, replicas of version 2 made $v2 (exactly $replicas: no step ran twice)"
echo "  scheduler CPU $(echo "$s1 - $s0" | bc) s, PostgreSQL CPU $(echo "$p1 - $p0" | bc) s;" \
     "per replaced replica $(echo "scale=2; ($s1 - $s0) * 1000 / $replicas" | bc) ms and $(echo "scale=2; ($p1 - $p0) * 1000 / $replicas" | bc) ms"
echo "  the idle fleet over ${idle_secs} s beforehand: scheduler CPU $(echo "$i1 - $i0" | bc) s, PostgreSQL CPU $(echo "$j1 - $j0" | bc) s"
