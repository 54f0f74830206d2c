# Sourced by scripts/test and scripts/demo: a private PostgreSQL server.
#   pg_fixture_start DIR   starts a server with its data under DIR, on a free
#                          loopback port; sets PG_FIXTURE_DSN and PG_FIXTURE_PORT.
#   pg_fixture_stop DIR    stops it (fast shutdown; immediate if that hangs).
# PG_FIXTURE_OPTIONS, if set, is added to the server's options (e.g.
# "-c shared_preload_libraries=pg_stat_statements" for a benchmark's profile).
# initdb refuses to run as root, so as root the server runs as the postgres user.

pg_fixture_bindir() {
  local d
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  done
  echo "pg-fixture: initdb not found (is postgresql-15 installed?)" >&2
  return 1
}

pg_fixture_as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

pg_fixture_free_port() {
  local port
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"; return 0
    fi
  done
  echo "pg-fixture: no free port found" >&2
  return 1
}

pg_fixture_start() {
  local dir=$1 bindir port
  bindir=$(pg_fixture_bindir) || return 1
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    pg_fixture_as_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 \
      --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; return 1; }
  fi
  if [ -f "$dir/port" ] && pg_fixture_as_owner "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    PG_FIXTURE_PORT=$(cat "$dir/port")   # already running: reuse it
    PG_FIXTURE_DSN="host=127.0.0.1 port=$PG_FIXTURE_PORT user=postgres dbname=postgres"
    export PG_FIXTURE_PORT PG_FIXTURE_DSN
    return 0
  fi
  if [ -n "${PG_FIXTURE_PORT_WANTED:-}" ]; then  # a fixed port (scripts/demo --port-base)
    port=$PG_FIXTURE_PORT_WANTED
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "pg-fixture: port $port is taken" >&2; return 1
    fi
  else
    port=$(pg_fixture_free_port) || return 1
  fi
  pg_fixture_as_owner sh -c "echo $port > '$dir/port'"
  pg_fixture_as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k '$dir' -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off ${PG_FIXTURE_OPTIONS:-}" \
    start >/dev/null || { tail -n 30 "$dir/server.log" >&2; return 1; }
  PG_FIXTURE_PORT=$port
  PG_FIXTURE_DSN="host=127.0.0.1 port=$port user=postgres dbname=postgres"
  export PG_FIXTURE_PORT PG_FIXTURE_DSN
}

pg_fixture_stop() {
  local dir=$1 bindir
  bindir=$(pg_fixture_bindir) || return 1
  [ -f "$dir/data/postmaster.pid" ] || return 0
  pg_fixture_as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 ||
    pg_fixture_as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
}
