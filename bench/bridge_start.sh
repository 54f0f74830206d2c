#!/usr/bin/env bash
# What network "bridge" costs a job's start (issue 37): N sequential starts
# (insert -> running, both by the database clock: the job's created and
# running events) of a job with network none, then of the same job with
# network bridge, on one pgfleet-hostd --driver container. The bridge is the
# benchmark's own (bridge pgfb<pid>, 10.235.0.0/24, a host-local address
# directory in the scratch dir: the machine's pgfleet0 is not touched).
# Prints p50 and p99 of each and bridge / none: the network's cost per start.
# Needs root, the CNI plugins in /usr/lib/cni and iptables.
#   bench/bridge_start.sh [N]   (default 200)
set -euo pipefail
n=${1:-200}
[ "$(id -u)" -eq 0 ] || { echo "bench/bridge_start.sh needs root (the container driver)" >&2; exit 1; }
for p in bridge host-local portmap firewall; do
  [ -x /usr/lib/cni/$p ] || { echo "CNI plugin $p not in /usr/lib/cni (scripts/install-deps)" >&2; exit 1; }
done
source "$(dirname "$0")/bench-fixture.sh"
bench_start bridge
bridge=pgfb$(( $$ % 100000 ))
trap 'ip link del "$bridge" 2>/dev/null || true; bench_cleanup' EXIT
mkdir -p "$tmp/cni"
cat >"$tmp/cni/50-bench.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "pgfleet-bench-$$", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$tmp/ipam",
            "ranges": [[{"subnet": "10.235.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}, "snat": true},
  {"type": "firewall"}]}
JSON
"$root/scripts/make-rootfs" busybox "$tmp/rootfs" >/dev/null
"$build/pgfleet-schedulerd" --db "$dsn" --token-file "$tmp/token" --log-level warn >"$tmp/s1.log" 2>&1 &
pids+=($!)
"$build/pgfleet-hostd" --db "$dsn" --token-file "$tmp/token" --id b1 --driver container \
  --data-dir "$tmp/b1" --cni-config "$tmp/cni" --listen 127.0.0.1:0 --log-level warn \
  >"$tmp/b1.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do
  [ "$(q "select count(*) from pgfleet.hosts where 'bridge' = any(networks)")" = 1 ] && break
  sleep 0.5
done
[ "$(q "select count(*) from pgfleet.hosts where 'bridge' = any(networks)")" = 1 ] || {
  echo "hostd offers no bridge: $(q "select network_note from pgfleet.hosts")" >&2; exit 1; }
run() {  # run NETWORK: N sequential starts of a job with that network
  local i id
  for i in $(seq 1 "$n"); do
    id=$(q "insert into pgfleet.jobs (formation, command, rootfs, network, cpu, memory)
            values ('bench-$1', array['true'], '$tmp/rootfs', '$1', 100, 32) returning id")
    until [ "$(q "select state in ('succeeded', 'failed') from pgfleet.jobs where id = $id")" = t ]; do
      sleep 0.02
    done
  done
}
stats() {  # stats NETWORK: "p50 p99" of insert -> running, in ms
  q "select round(percentile_cont(0.5) within group (order by ms)::numeric, 1) || ' ' ||
            round(percentile_cont(0.99) within group (order by ms)::numeric, 1)
       from (select extract(epoch from r.at - c.at) * 1000 as ms
               from pgfleet.jobs j
               join pgfleet.job_events c on c.job_id = j.id and c.kind = 'created'
               join pgfleet.job_events r on r.job_id = j.id and r.kind = 'running'
              where j.formation = 'bench-$1') s"
}
run none; run bridge
failed=$(q "select count(*) from pgfleet.jobs where state <> 'succeeded'")
read -r none50 none99 <<<"$(stats none)"
read -r br50 br99 <<<"$(stats bridge)"
echo "$n sequential starts each (insert -> running), failed $failed"
echo "  none:   p50 ${none50} ms  p99 ${none99} ms"
echo "  bridge: p50 ${br50} ms  p99 ${br99} ms"
awk -v a="$br50" -v b="$none50" -v c="$br99" -v d="$none99" \
  'BEGIN { printf "  bridge / none: p50 %.2f x  p99 %.2f x\n", a / b, c / d }'
