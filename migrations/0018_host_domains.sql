-- The one-column rules of hosts as domains, one per rule, with the rule's
-- name (as migration 0016 did for the jobs' spec columns): a domain's rule is
-- compiled once per session and checked only when a value of its column is
-- written, so an allocation update pays for none of them
-- (docs/decisions/0007).
--
-- The two rules that span columns (cpu_allocated between 0 and cpu, the same
-- for memory: no host is ever overcommitted) stay table CHECKs.
--
-- A bad value fails as before, naming the field and the rule (SQLSTATE
-- 23514): value for domain pgfleet.host_api_url violates check constraint
-- "api_url must be an http URL".

-- What depends on these columns is made again by sql/: views (030_views.sql)
-- and the config_version trigger, which names them (020_triggers.sql).
drop view if exists pgfleet.cluster_summary, pgfleet.host_status, pgfleet.allocation_drift;
drop trigger if exists hosts_config_changed on pgfleet.hosts;

create domain pgfleet.host_id as text
  constraint "host id must be 1-100 of A-Z a-z 0-9 . _ -" check (value ~ '^[A-Za-z0-9._-]{1,100}$');
create domain pgfleet.host_api_url as text
  constraint "api_url must be an http URL" check (value ~ '^https?://');
create domain pgfleet.host_cpu as integer constraint "cpu must be > 0" check (value > 0);
create domain pgfleet.host_memory as integer constraint "memory must be > 0" check (value > 0);
create domain pgfleet.host_labels as jsonb
  constraint "labels must be an object of strings"
    check (jsonb_typeof(value) = 'object'
           and not jsonb_path_exists(value, '$.* ? (@.type() != "string")'));
create domain pgfleet.host_state as text
  constraint "host state must be up, draining, offline or lost"
    check (value in ('up', 'draining', 'offline', 'lost'));

-- Each column takes its domain in place of its CHECK of the same name, in one
-- ALTER TABLE (one pass over the rows).
do $$
begin
  execute (
    select 'alter table pgfleet.hosts ' ||
           string_agg(format('drop constraint %I, alter column %I type pgfleet.%I',
                             c.conname, a.attname, 'host_' || a.attname), ', ')
      from pg_constraint c
      join pg_attribute a on a.attrelid = c.conrelid and array[a.attnum] = c.conkey
      join pg_type d on d.typname = 'host_' || a.attname
                    and d.typnamespace = 'pgfleet'::regnamespace
     where c.conrelid = 'pgfleet.hosts'::regclass and c.contype = 'c'
       and c.conname = (select dc.conname from pg_constraint dc where dc.contypid = d.oid));
  if (select count(*) from pg_attribute a join pg_type d on d.oid = a.atttypid
       where a.attrelid = 'pgfleet.hosts'::regclass
         and d.typname like 'host\_%' and d.typnamespace = 'pgfleet'::regnamespace) <> 6 then
    raise exception 'migration 0018: not every host column took its domain';
  end if;
end $$;
