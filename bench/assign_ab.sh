#!/usr/bin/env bash
# pgfleet.assign_jobs of two schema versions side by side, on one private
# PostgreSQL: each git revision's migrations/ and sql/ make a database of
# their own (git archive, no build), then every round times, in each,
# plans of 500 jobs without ports placed 10 to a host on 50 hosts (20 plans
# a round, jobs cancelled and hosts emptied between plans).
#   bench/assign_ab.sh OLD_REV NEW_REV [ROUNDS]     e.g. bench/assign_ab.sh 8ba64a9 HEAD 2
set -euo pipefail
old=$1 new=$2 rounds=${3:-2}
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/pg-fixture.sh"
dir=$(mktemp -d /tmp/pgfleet-assign-ab.XXXXXX)
chmod 755 "$dir"
trap 'pg_fixture_stop "$dir/pg" >/dev/null 2>&1; rm -rf "$dir"' EXIT
pg_fixture_start "$dir/pg" >/dev/null
dsn="host=127.0.0.1 port=$PG_FIXTURE_PORT user=postgres"
schema() {  # REV DB: that revision's migrations, then its sql/, in one transaction
  mkdir -p "$dir/$2"
  git -C "$here" archive "$1" migrations sql | tar -x -C "$dir/$2"
  psql "$dsn dbname=postgres" -qc "create database $2"
  { echo "begin; create schema pgfleet; create table pgfleet.schema_migrations"
    echo "(name text primary key, applied_at timestamptz default now());"
    for f in "$dir/$2"/migrations/*.sql "$dir/$2"/sql/*.sql; do cat "$f"; echo ";"; done
    echo "commit;"; } | psql "$dsn dbname=$2" -q -v ON_ERROR_STOP=1 >/dev/null 2>&1
  psql "$dsn dbname=$2" -qc "select pgfleet.register_host('h' || i, 'http://127.0.0.1:1',
    1000000, 1000000, '{}', 'process', null) from generate_series(1, 50) i" >/dev/null
}
schema "$old" ab_old
schema "$new" ab_new
plans="do \$\$
declare t0 timestamptz; total interval := '0'; v_plan jsonb;
begin
  for r in 1..20 loop
    insert into pgfleet.jobs (command, cpu, memory) select '{true}', 10, 8 from generate_series(1, 500);
    select jsonb_agg(jsonb_build_object('job', id, 'host', 'h' || (1 + (n % 50)))) into v_plan
      from (select id, row_number() over (order by id) n from pgfleet.jobs where state = 'pending') x;
    t0 := clock_timestamp();
    perform count(*) from pgfleet.assign_jobs(v_plan);
    total := total + (clock_timestamp() - t0);
    update pgfleet.jobs set state = 'cancelled', finished_at = now() where state = 'assigned';
    update pgfleet.hosts set cpu_allocated = 0, memory_allocated = 0;
  end loop;
  raise notice 'ms %', round(extract(epoch from total) * 1000 / 20, 2);
end \$\$;"
ms() { psql "$dsn dbname=$1" -q -c "$plans" 2>&1 | sed -n 's/.*NOTICE:  ms \([0-9.]*\).*/\1/p'; }
printf '%-6s %14s %14s\n' round "old_ms ($old)" "new_ms ($new)"
for r in $(seq 1 "$rounds"); do
  printf '%-6s %14s %14s\n' "$r" "$(ms ab_old)" "$(ms ab_new)"
done
