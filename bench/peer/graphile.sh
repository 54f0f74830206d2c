#!/usr/bin/env bash
# The peer job queue: how many no-op jobs per second does graphile-worker 0.18
# run? Installs the latest graphile-worker 0.18.x from npm into a temporary
# directory (removed at exit; the npm cache is reused, nothing is installed
# globally), runs its migrations into the given database (schema
# graphile_worker), adds the jobs with one SQL statement before the clock
# starts, then starts W worker processes of concurrency C in graphile-worker's
# batched mode (local queue of 500, batched completions: the configuration of
# its own perfTest) and times until no job is left.
usage() {
  cat <<'EOF'
Usage: bench/peer/graphile.sh (--db DSN | --private) [--jobs N] [--json]
                              [--workers W] [--concurrency C] [--pg-pid PID]
  --db DSN         database to use (libpq key=value DSN or postgres:// URI); it
                   must not hold graphile_worker jobs already
  --private        start a private PostgreSQL (scripts/pg-fixture.sh) instead,
                   stopped and removed at exit
  --jobs N         no-op jobs to run (default 100000)
  --workers W      worker processes (default 4)
  --concurrency C  concurrent jobs per worker process (default 24)
  --pg-pid PID     the server's postmaster pid (with --db): also print the CPU
                   seconds its processes spent while the jobs went in and while
                   they ran (pg_cpu_enqueue_s, pg_cpu_s); --private measures
                   its own server
  --json           one JSON line: {"peer":"graphile-worker","version":..,"jobs":..,
                   "seconds":..,"throughput_jobs_per_s":..,"enqueue_seconds":..
                   [,"pg_cpu_enqueue_s":..,"pg_cpu_s":..]}
                   or {"peer":"graphile-worker","skipped":"reason"}
  --help           this text
If graphile-worker cannot be installed (no npm, no registry), prints
"skipped: ..." and exits 0.
EOF
}
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
db=""; private=0; jobs=100000; workers=4; concurrency=24; json=0; pg_pid=0
while [ $# -gt 0 ]; do
  case $1 in
    --db) db=${2:?--db needs a DSN}; shift 2 ;;
    --private) private=1; shift ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --workers) workers=${2:?--workers needs a number}; shift 2 ;;
    --concurrency) concurrency=${2:?--concurrency needs a number}; shift 2 ;;
    --pg-pid) pg_pid=${2:?--pg-pid needs a pid}; shift 2 ;;
    --json) json=1; shift ;;
    --help|-h) usage; exit 0 ;;
    *) echo "graphile: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ $pg_pid =~ ^[0-9]+$ ]] || { echo "graphile: --pg-pid must be a pid" >&2; exit 2; }
for n in "$jobs" "$workers" "$concurrency"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "graphile: counts must be positive integers" >&2; exit 2; }
done
if [ -z "$db" ] && [ "$private" -eq 0 ]; then
  echo "graphile: give --db DSN or --private" >&2; usage >&2; exit 2
fi

skip() {
  if [ "$json" -eq 1 ]; then
    printf '{"peer":"graphile-worker","skipped":"%s"}\n' "$(printf %s "$1" | tr -d '"\\\n' | cut -c1-200)"
  else
    echo "skipped: graphile-worker: $1"
  fi
  exit 0
}
say() { [ "$json" -eq 1 ] || echo "$@"; }

[ "$private" -eq 0 ] || source "$root/scripts/pg-fixture.sh"
tmp=$(mktemp -d /tmp/pgfleet-peer-graphile.XXXXXX)
chmod 755 "$tmp"
cleanup() {
  if [ "$private" -eq 1 ]; then pg_fixture_stop "$tmp/pg" || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

command -v node >/dev/null || skip "node is not installed"
command -v npm >/dev/null || skip "npm is not installed"
echo '{"name":"pgfleet-peer-graphile","private":true}' >"$tmp/package.json"
say "graphile: installing graphile-worker@0.18 into $tmp"
if ! (cd "$tmp" && npm install --no-audit --no-fund --loglevel=error graphile-worker@0.18) \
    >"$tmp/npm.log" 2>&1; then
  skip "npm install graphile-worker@0.18 failed: $(grep -m1 -i 'err' "$tmp/npm.log" || tail -n 1 "$tmp/npm.log")"
fi
cp "$here/graphile-bench.mjs" "$tmp/"

if [ "$private" -eq 1 ]; then
  pg_fixture_start "$tmp/pg"
  psql "$PG_FIXTURE_DSN" -qc "create database peer"
  db="host=127.0.0.1 port=$PG_FIXTURE_PORT user=postgres dbname=peer"
  pg_pid=$(head -n 1 "$tmp/pg/data/postmaster.pid")
fi

say "graphile: $jobs jobs, $workers workers x concurrency $concurrency, load $(cut -d' ' -f1-3 /proc/loadavg)"
result=$(node "$tmp/graphile-bench.mjs" --db "$db" --jobs "$jobs" --workers "$workers" --concurrency "$concurrency" \
  --pg-pid "$pg_pid")
read -r version seconds enqueue pg_enqueue pg_run < <(node -e '
  const r = JSON.parse(process.argv[1]);
  const cpu = (v) => (v === undefined ? "-" : v.toFixed(2));
  console.log(r.version, r.seconds.toFixed(3), r.enqueue_seconds.toFixed(3),
              cpu(r.pg_cpu_enqueue_s), cpu(r.pg_cpu_s));' "$result")
tput=$(awk -v j="$jobs" -v s="$seconds" 'BEGIN { printf "%.1f", j / s }')
if [ "$json" -eq 1 ]; then
  cpu_json=""
  [ "$pg_run" = - ] || cpu_json=$(printf ',"pg_cpu_enqueue_s":%s,"pg_cpu_s":%s' "$pg_enqueue" "$pg_run")
  printf '{"peer":"graphile-worker","version":"%s","jobs":%d,"seconds":%s,"throughput_jobs_per_s":%s,"enqueue_seconds":%s%s}\n' \
    "$version" "$jobs" "$seconds" "$tput" "$enqueue" "$cpu_json"
else
  printf '%-16s %-8s %8s %10s %10s %12s %14s %10s\n' peer version jobs enqueue_s seconds jobs/s pg_cpu_enqueue pg_cpu_run
  printf '%-16s %-8s %8d %10s %10s %12s %14s %10s\n' graphile-worker "$version" "$jobs" "$enqueue" "$seconds" "$tput" \
    "$pg_enqueue" "$pg_run"
fi
