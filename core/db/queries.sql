-- core/db's own statements: a daemon connection's session settings
-- (connection.cpp) and `pgfleet migrate`'s (migrate.cpp). None is prepared:
-- each runs once per connection or per migrate, as text. Each block is a
-- db::Statement constant k<Name> (cmake/embed_queries.cmake).

-- name: session_defaults
-- A daemon connection's session settings. No JIT: the daemons' statements
-- are short and run thousands of times a second, and JIT compiling one
-- (PostgreSQL does when a generic plan's estimated cost is high, e.g. the
-- scheduler's formations query) took 430 ms a call. A statement_timeout of
-- 60s unless the DSN set one: a statement that runs for a minute (waiting on
-- a lock a forgotten psql session holds) fails and is retried, rather than
-- stalling the daemon for good.
select set_config('jit', 'off', false),
       case when current_setting('statement_timeout') = '0'
            then set_config('statement_timeout', '60s', false) end;

-- name: migrate_quiet_notices
-- Quiets NOTICEs such as "schema already exists, skipping" for the
-- transaction.
set local client_min_messages = warning;

-- name: migrate_lock
-- $1, $2: the lock class and model::kMigrateLockKey. One migrate at a time,
-- until its transaction ends.
select pg_advisory_xact_lock($1, $2);

-- name: migrate_create_schema
create schema if not exists pgfleet;

-- name: migrate_create_history
-- The migrations applied, by file name: each is applied once.
create table if not exists pgfleet.schema_migrations (
  name text primary key,
  applied_at timestamptz not null default now());

-- name: migrate_was_applied
-- A row when the migration named $1 was applied.
select 1 from pgfleet.schema_migrations where name = $1;

-- name: migrate_record_applied
insert into pgfleet.schema_migrations (name) values ($1);

-- name: migrate_stale_functions
-- Run after sql/ re-created its objects in this transaction: every function
-- of the pgfleet schema sql/ no longer defines (its pg_proc row not written
-- by this transaction, and not an extension's), as what (e.g. "function
-- pgfleet.f(integer)") and drop_statement, the statement that drops it.
select kind || ' ' || signature as what, 'drop ' || kind || ' ' || signature as drop_statement
  from (select case p.prokind when 'a' then 'aggregate' when 'p' then 'procedure'
                              else 'function' end as kind,
               format('%I.%I(%s)', n.nspname, p.proname,
                      pg_get_function_identity_arguments(p.oid)) as signature
          from pg_proc p join pg_namespace n on n.oid = p.pronamespace
         where n.nspname = 'pgfleet' and p.xmin <> pg_current_xact_id()::xid
           and not exists (select 1 from pg_depend d where d.classid = 'pg_proc'::regclass
                              and d.objid = p.oid and d.deptype = 'e')) stale
 order by signature;
