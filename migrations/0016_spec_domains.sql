-- The rules of a job's spec columns (and of the same columns of formations,
-- its template) as domains, one per rule, with the rule's name: a domain's
-- rule is compiled once per session and checked only when a value of its
-- column is written, at insert, never when a job changes state
-- (docs/decisions/0007).
--
-- A bad value fails as before, naming the field and the rule (SQLSTATE
-- 23514): value for domain pgfleet.spec_cpu violates check constraint "cpu
-- must be > 0".

-- What depends on these columns is made again by sql/: views (030_views.sql)
-- and the template check's trigger, which names them (020_triggers.sql).
drop view if exists pgfleet.cluster_summary, pgfleet.host_status, pgfleet.formation_status,
  pgfleet.allocation_drift, pgfleet.visible_jobs;
drop trigger if exists formations_check_template on pgfleet.formations;

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

-- Each column takes its domain in place of its CHECK of the same name, in one
-- ALTER TABLE per table (one pass over its rows). Formations have no
-- max_attempts (a queue's setting, not a template's).
do $$
declare
  t text;
begin
  foreach t in array array['jobs', 'formations'] loop
    execute (
      select 'alter table pgfleet.' || quote_ident(t) || ' ' ||
             string_agg(format('drop constraint %I, alter column %I type pgfleet.%I',
                               c.conname, a.attname, 'spec_' || a.attname), ', ')
        from pg_constraint c
        join pg_attribute a on a.attrelid = c.conrelid and array[a.attnum] = c.conkey
        join pg_type d on d.typname = 'spec_' || a.attname
                      and d.typnamespace = 'pgfleet'::regnamespace
       where c.conrelid = ('pgfleet.' || t)::regclass and c.contype = 'c'
         and c.conname = (select dc.conname from pg_constraint dc where dc.contypid = d.oid));
  end loop;
  -- Every spec domain is its column's type in both tables now (but
  -- formations.max_attempts, which does not exist).
  if (select count(*) from pg_attribute a join pg_type d on d.oid = a.atttypid
       where a.attrelid in ('pgfleet.jobs'::regclass, 'pgfleet.formations'::regclass)
         and d.typname like 'spec\_%' and d.typnamespace = 'pgfleet'::regnamespace) <> 23 then
    raise exception 'migration 0016: not every spec column took its domain';
  end if;
end $$;
