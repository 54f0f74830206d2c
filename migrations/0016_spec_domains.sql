-- The rules of a job's spec columns (and of the same columns of formations,
-- its template) as domains, one per rule, with the rule's name. A table CHECK
-- is read back from its stored text and compiled by every statement that
-- writes the table, and evaluated on every row written whichever columns
-- changed: 16 of them for each insert, assignment and report of a job (42 µs
-- a statement, 27 % of a single-row insert; docs/benchmarks.md). A domain's
-- rule is compiled once per session and checked only when a value of its
-- column is written: at insert, never when a job changes state.
--
-- A bad value fails as before, naming the field and the rule (SQLSTATE
-- 23514): value for domain pgfleet.spec_cpu violates check constraint "cpu
-- must be > 0".

-- Views over these columns are made again by sql/030_views.sql.
drop view if exists pgfleet.cluster_summary, pgfleet.host_status, pgfleet.formation_status,
  pgfleet.allocation_drift, pgfleet.visible_jobs;

create domain pgfleet.spec_command as text[]
  constraint "command must be a non-empty array without nulls"
    check (value is null or (cardinality(value) > 0 and array_position(value, null) is null
                             and value[1] <> ''));
create domain pgfleet.spec_env as jsonb
  constraint "env must be an object of strings"
    check (jsonb_typeof(value) = 'object'
           and not jsonb_path_exists(value, '$.* ? (@.type() != "string")'));
create domain pgfleet.spec_constraints as jsonb
  constraint "constraints must be an object of strings"
    check (jsonb_typeof(value) = 'object'
           and not jsonb_path_exists(value, '$.* ? (@.type() != "string")'));
create domain pgfleet.spec_cpu as integer constraint "cpu must be > 0" check (value > 0);
create domain pgfleet.spec_memory as integer constraint "memory must be > 0" check (value > 0);
create domain pgfleet.spec_priority as integer
  constraint "priority must be between 0 and 100" check (value between 0 and 100);
create domain pgfleet.spec_max_attempts as integer
  constraint "max_attempts must be >= 1" check (value >= 1);
create domain pgfleet.spec_network as text
  constraint "network must be 'host' or 'none'" check (value in ('host', 'none'));
create domain pgfleet.spec_pids_max as integer
  constraint "pids_max must be > 0" check (value > 0);
create domain pgfleet.spec_stop_grace_seconds as integer
  constraint "stop_grace_seconds must be >= 0" check (value >= 0);
create domain pgfleet.spec_log_max_files as integer
  constraint "log_max_files must be between 2 and 100" check (value between 2 and 100);
create domain pgfleet.spec_log_max_file_mb as integer
  constraint "log_max_file_mb must be between 1 and 1024" check (value between 1 and 1024);

alter table pgfleet.jobs
  drop constraint "command must be a non-empty array without nulls",
  drop constraint "env must be an object of strings",
  drop constraint "constraints must be an object of strings",
  drop constraint "cpu must be > 0",
  drop constraint "memory must be > 0",
  drop constraint "priority must be between 0 and 100",
  drop constraint "max_attempts must be >= 1",
  drop constraint "network must be 'host' or 'none'",
  drop constraint "pids_max must be > 0",
  drop constraint "stop_grace_seconds must be >= 0",
  drop constraint "log_max_files must be between 2 and 100",
  drop constraint "log_max_file_mb must be between 1 and 1024",
  alter column command type pgfleet.spec_command,
  alter column env type pgfleet.spec_env,
  alter column constraints type pgfleet.spec_constraints,
  alter column cpu type pgfleet.spec_cpu,
  alter column memory type pgfleet.spec_memory,
  alter column priority type pgfleet.spec_priority,
  alter column max_attempts type pgfleet.spec_max_attempts,
  alter column network type pgfleet.spec_network,
  alter column pids_max type pgfleet.spec_pids_max,
  alter column stop_grace_seconds type pgfleet.spec_stop_grace_seconds,
  alter column log_max_files type pgfleet.spec_log_max_files,
  alter column log_max_file_mb type pgfleet.spec_log_max_file_mb;

alter table pgfleet.formations
  drop constraint "command must be a non-empty array without nulls",
  drop constraint "env must be an object of strings",
  drop constraint "constraints must be an object of strings",
  drop constraint "cpu must be > 0",
  drop constraint "memory must be > 0",
  drop constraint "priority must be between 0 and 100",
  drop constraint "network must be 'host' or 'none'",
  drop constraint "pids_max must be > 0",
  drop constraint "stop_grace_seconds must be >= 0",
  drop constraint "log_max_files must be between 2 and 100",
  drop constraint "log_max_file_mb must be between 1 and 1024",
  alter column command type pgfleet.spec_command,
  alter column env type pgfleet.spec_env,
  alter column constraints type pgfleet.spec_constraints,
  alter column cpu type pgfleet.spec_cpu,
  alter column memory type pgfleet.spec_memory,
  alter column priority type pgfleet.spec_priority,
  alter column network type pgfleet.spec_network,
  alter column pids_max type pgfleet.spec_pids_max,
  alter column stop_grace_seconds type pgfleet.spec_stop_grace_seconds,
  alter column log_max_files type pgfleet.spec_log_max_files,
  alter column log_max_file_mb type pgfleet.spec_log_max_file_mb;
