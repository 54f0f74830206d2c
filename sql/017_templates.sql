-- Formation templates: the one list of columns that make a job template, and
-- making replicas from it. A column added to the template must be added to
-- both pgfleet.jobs and pgfleet.formations (a migration) and to this list;
-- tests/integration/template_test.cpp fails until all three agree.

create or replace function pgfleet.template_columns() returns text[]
language sql immutable as $$
  select array['command', 'env', 'cpu', 'memory', 'constraints', 'priority', 'rootfs', 'run_as',
               'network', 'pids_max', 'cpu_hard_limit', 'stop_grace_seconds', 'log_max_files',
               'log_max_file_mb', 'disk', 'seccomp', 'health_check', 'ports', 'files']
$$;
comment on function pgfleet.template_columns() is
  'Columns of pgfleet.formations copied into every replica it creates: the job template. Same names, types, defaults and rules as in pgfleet.jobs.';

-- The one insert of replicas from a formation's template: one row per
-- element of p_pins, pinned to that host (null: not pinned), for a
-- formation of kind p_kind. max_attempts is the formation's (a sysbatch
-- job's retries; replicas of services and system formations restart
-- regardless of it). A formation marked done (only a sysbatch one can be)
-- makes none, however it was read before.
create or replace function pgfleet.insert_replicas(p_formation integer, p_kind text, p_pins text[])
returns integer
language plpgsql as $$
declare
  v_created integer;
begin
  if p_pins is null or cardinality(p_pins) = 0 then
    return 0;
  end if;
  execute format(
    'insert into pgfleet.jobs (formation, owner, privileged, pinned_host, max_attempts, version,
                               preemptible, %1$s)
     select f.name, f.owner, f.privileged, h, f.max_attempts, f.version,
            coalesce(f.preemptible, f.kind not in (''service'', ''system'')), %2$s
       from pgfleet.formations f, unnest($2) h
      where f.id = $1 and f.kind = $3 and f.done_at is null',
    (select string_agg(quote_ident(c), ', ') from unnest(pgfleet.template_columns()) c),
    (select string_agg('f.' || quote_ident(c), ', ') from unnest(pgfleet.template_columns()) c))
  using p_formation, p_pins, p_kind;
  get diagnostics v_created = row_count;
  return v_created;
end $$;
comment on function pgfleet.insert_replicas(integer, text, text[]) is
  'Inserts a replica of formation p_formation (of kind p_kind) from its template (pgfleet.template_columns()) for each element of p_pins, pinned to that host when not null, with the formation''s max_attempts, current version and preemptible (null: false for service and system replicas, true otherwise); returns how many. Used by create_replicas, create_system_replicas and, for a sysbatch formation''s jobs, by schedulers (schedulerd_create_sysbatch_jobs) directly.';

create or replace function pgfleet.create_replicas(p_formation integer, p_count integer)
returns integer
language sql as $$
  select case when p_count is null or p_count <= 0 then 0
              else pgfleet.insert_replicas(p_formation, 'service',
                                           array_fill(null::text, array[p_count])) end
$$;
comment on function pgfleet.create_replicas(integer, integer) is
  'Inserts p_count new replicas of a service formation from its template (pgfleet.template_columns()); returns how many. The caller holds the formation''s lock and bounds p_count.';

create or replace function pgfleet.create_system_replicas(p_formation integer, p_hosts text[])
returns integer
language sql as $$
  select pgfleet.insert_replicas(p_formation, 'system', p_hosts)
$$;
comment on function pgfleet.create_system_replicas(integer, text[]) is
  'Inserts one replica of a system formation pinned to each host of p_hosts, from its template (pgfleet.template_columns()); returns how many. The caller holds the formation''s lock.';

-- Security definer: formation_status calls it for whoever reads the view
-- (a submitter may not read formations or hosts directly), and it returns
-- only host ids, which host_status shows anyway.
create or replace function pgfleet.system_hosts(p_formation integer)
returns setof text
language sql stable security definer set search_path = pgfleet, pg_temp as $$
  select h.id::text from pgfleet.hosts h, pgfleet.formations f
   where f.id = p_formation and h.state = 'up' and h.admitted
     and h.labels @> coalesce(f.constraints, '{}'::jsonb)
     and (f.privileged or pgfleet.driver_isolates(h.driver))
   order by h.id
$$;
comment on function pgfleet.system_hosts(integer) is
  'The hosts a system formation runs one replica on (and a sysbatch formation one job on): up (not draining, offline or lost), admitted, with every label of its constraints, and isolating jobs unless the formation is privileged.';
