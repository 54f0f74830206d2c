# Sourced by bench/e2e --memory (its helpers and $dsn, $build, $tmp in scope).
# 1. schedulerd with 10,000 hosts and 100,000 pending jobs: host rows written
#    directly (registered through pgfleet.register_host, heartbeats kept fresh
#    by a loop), jobs that fit no host (memory 100,000 MiB against 1,024), so
#    every pass claims, plans and records reasons without dispatching.
# 2. One real pgfleet-hostd (process driver), idle for 5 s.
# 3. One process of 1,000 hollow hosts, divided by 1,000.
say "e2e --memory: 10,000 host rows, 100,000 pending jobs"
q "select count(pgfleet.register_host('mem-' || g, 'http://127.0.0.1:9/hosts/mem-' || g, 1000, 1024,
     '{}', 'sim', 'bench/e2e --memory: a row, no process')) from generate_series(1, 10000) g" >/dev/null
( while true; do q "update pgfleet.host_heartbeats set last_seen = now()" >/dev/null 2>&1; sleep 1; done ) &
pids+=($!)
q "insert into pgfleet.jobs (command, memory) select '{true}', 100000 from generate_series(1, 100000)" >/dev/null
"$build/pgfleet-schedulerd" --db "$dsn" --token-file "$tmp/token" --id mem --log-level warn \
  >"$tmp/mem-sched.log" 2>&1 &
spid=$!; pids+=($spid)
sleep 15
sched_rss=$(rss_mb "$spid"); sched_hwm=$(hwm_mb "$spid")
reasons=$(q "select count(*) from pgfleet.jobs where state = 'pending' and error is not null")
kill "$spid"

mkdir -p "$tmp/idle"
"$build/pgfleet-hostd" --db "$dsn" --token-file "$tmp/token" --id idle-1 --driver process \
  --data-dir "$tmp/idle" --log-level warn >"$tmp/idle.log" 2>&1 &
hpid=$!; pids+=($hpid)
sleep 5
hostd_rss=$(rss_mb "$hpid")
kill "$hpid"

start_hollow 1000 hollow-
hollow_pid=${pids[-1]}
for _ in $(seq 1 120); do
  [ "$(q "select count(*) from pgfleet.host_heartbeats where host_id like 'hollow-%' and last_seen > now() - interval '5 s'")" -ge 1000 ] && break
  sleep 0.5
done
sleep 5
hollow_rss=$(rss_mb "$hollow_pid")
per_host_kb=$(calc "scale=1; $hollow_rss * 1024 / 1000")
if [ "$json" -eq 1 ]; then
  printf '{"memory":true,"scheduler_hosts":10000,"scheduler_pending":100000,"scheduler_rss_mb":%s,"scheduler_peak_rss_mb":%s,"pending_with_reason":%d,"hostd_idle_rss_mb":%s,"hollow_hosts":1000,"hollow_process_rss_mb":%s,"rss_per_hollow_host_kb":%s}\n' \
    "$sched_rss" "$sched_hwm" "$reasons" "$hostd_rss" "$hollow_rss" "$per_host_kb"
else
  printf '%-40s %s\n' "schedulerd RSS MB (10k hosts, 100k pending)" "$sched_rss" \
    "schedulerd peak RSS MB" "$sched_hwm" "pending jobs given a reason" "$reasons" \
    "hostd idle RSS MB (process driver)" "$hostd_rss" \
    "1,000 hollow hosts: process RSS MB" "$hollow_rss" "RSS per hollow host KB" "$per_host_kb"
fi
