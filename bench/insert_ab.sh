#!/usr/bin/env bash
# Bulk-insert cost of two pgfleet builds side by side, on one private
# PostgreSQL: each build migrates its own database, then every round times a
# 100,000-row INSERT ... SELECT into each (as the owner), and into the second
# as a pgfleet_submitter login (row-level security and the privilege checks).
#   bench/insert_ab.sh OLD_PGFLEET NEW_PGFLEET [ROUNDS] [ROWS]
set -euo pipefail
old=$1 new=$2 rounds=${3:-5} rows=${4:-100000}
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/pg-fixture.sh"
dir=$(mktemp -d /tmp/pgfleet-insert-ab.XXXXXX)
trap 'pg_fixture_stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
pg_fixture_start "$dir" >/dev/null
dsn="host=127.0.0.1 port=$PG_FIXTURE_PORT user=postgres"
psql "$dsn dbname=postgres" -qc "create database ab_old" -c "create database ab_new"
"$old" migrate --db "$dsn dbname=ab_old" >/dev/null
"$new" migrate --db "$dsn dbname=ab_new" >/dev/null
psql "$dsn dbname=ab_new" -qc "create role ab_submitter login in role pgfleet_submitter"
insert="insert into pgfleet.jobs (command) select array['true'] from generate_series(1, $rows)"
ms() { psql "$1" -qAt -c '\timing on' -c "$insert" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'; }
printf '%-6s %12s %12s %16s\n' round old_owner_ms new_owner_ms new_submitter_ms
for r in $(seq 1 "$rounds"); do
  printf '%-6s %12s %12s %16s\n' "$r" "$(ms "$dsn dbname=ab_old")" "$(ms "$dsn dbname=ab_new")" \
    "$(ms "$dsn dbname=ab_new user=ab_submitter")"
done
psql "$dsn dbname=postgres" -qc "drop database ab_new" -c "drop role ab_submitter" >/dev/null
