# Sourced by the benchmarks that run the daemons (failover.sh, rollout.sh,
# health_writes.sh): checks the build, starts a throwaway PostgreSQL with a
# migrated database `bench`, and on exit ends every process in `pids` (and
# any other process under the scratch dir) and removes server and dir.
#   source bench/bench-fixture.sh; bench_start NAME
# sets: root, build, tmp (scratch dir, /tmp/pgfleet-NAME.*), dsn, pids, the
# token file $tmp/token, and q SQL (one value or rows, unaligned).
bench_start() {
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  build=${PGFLEET_BUILD_DIR:-$root/build}
  local b
  for b in pgfleet pgfleet-schedulerd pgfleet-hostd; do
    [ -x "$build/$b" ] || { echo "build $b first (cmake --build build)" >&2; exit 1; }
  done
  source "$root/scripts/pg-fixture.sh"
  tmp=$(mktemp -d "/tmp/pgfleet-$1.XXXXXX"); chmod 755 "$tmp"
  pids=()
  trap bench_cleanup EXIT
  pg_fixture_start "$tmp/pg" >/dev/null
  psql "$PG_FIXTURE_DSN" -qc "create database bench"
  dsn="host=127.0.0.1 port=$PG_FIXTURE_PORT user=postgres dbname=bench"
  echo bench-token >"$tmp/token"
  "$build/pgfleet" migrate --db "$dsn" >/dev/null
}
bench_cleanup() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pkill -9 -f "$tmp/" 2>/dev/null || true
  pg_fixture_stop "$tmp/pg"; rm -rf "$tmp"
}
q() { psql "$dsn" -Atqc "$1"; }
