-- Hosts: registration, heartbeats, operator states and drains, and what each host should run.

create or replace function pgfleet.register_host(p_id text, p_api_url text, p_cpu integer,
                                                 p_memory integer, p_labels jsonb,
                                                 p_driver text, p_driver_note text,
                                                 p_port_range int4range default null,
                                                 p_networks text[] default null,
                                                 p_network_note text default null)
returns bigint
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_caller text := pgfleet.caller();
  v_generation bigint;
  v_old pgfleet.hosts;
  v_known boolean;
  v_labels jsonb := coalesce(p_labels, '{}');
  v_cpu integer;
  v_memory integer;
  v_offered jsonb;
  v_admitter text;
  v_port_range int4range := coalesce(p_port_range, int4range(20000, 32001));
  v_networks text[] := coalesce(p_networks, '{host,none}');
begin
  perform pgfleet.require_host(p_id);
  select * into v_old from pgfleet.hosts where id = p_id;
  v_known := found;
  -- What the host offers: what it declares, within what its admission
  -- allowed (nothing more, whatever hostd says).
  v_cpu := least(p_cpu, coalesce(v_old.allowed_cpu, p_cpu));
  v_memory := least(p_memory, coalesce(v_old.allowed_memory, p_memory));
  v_offered := pgfleet.allowed_labels(v_labels, v_old.allowed_labels);
  -- Ports held outside the new range stay held (the scheduler gives none
  -- there any more); they are freed as their attempts end.
  if v_known and (v_old.cpu_allocated > v_cpu or v_old.memory_allocated > v_memory) then
    raise exception 'host % cannot register with cpu %m and memory % MiB: its jobs hold %m and % MiB (stop or move them first)',
      p_id, v_cpu, v_memory, v_old.cpu_allocated, v_old.memory_allocated
      using errcode = 'check_violation';
  end if;
  -- Admitted at once: an admin's host, or one of a login an operator
  -- marked auto_admit. Any other waits for pgfleet.admit_host.
  v_admitter := case
    when pgfleet.is_admin(v_caller) then format('admin %s', v_caller)
    when exists (select 1 from pgfleet.host_logins l
                  where l.login = v_caller and l.host_id = p_id and l.auto_admit)
      then format('login %s (auto_admit)', v_caller)
  end;
  insert into pgfleet.hosts as h (id, api_url, cpu, memory, labels, driver, driver_note,
                                  admitted, admitted_at, admitted_by,
                                  declared_cpu, declared_memory, declared_labels,
                                  port_range, networks, network_note)
  values (p_id, p_api_url, v_cpu, v_memory, v_offered, p_driver, p_driver_note,
          v_admitter is not null, case when v_admitter is not null then now() end, v_admitter,
          p_cpu, p_memory, v_labels, v_port_range, v_networks, p_network_note)
  on conflict (id) do update
    set api_url = excluded.api_url, cpu = excluded.cpu, memory = excluded.memory,
        port_range = excluded.port_range, networks = excluded.networks,
        network_note = excluded.network_note,
        labels = excluded.labels, driver = excluded.driver, driver_note = excluded.driver_note,
        declared_cpu = excluded.declared_cpu, declared_memory = excluded.declared_memory,
        declared_labels = excluded.declared_labels,
        -- Registering never takes an admission back; it may give one.
        admitted = h.admitted or excluded.admitted,
        admitted_at = case when h.admitted then h.admitted_at else excluded.admitted_at end,
        admitted_by = case when h.admitted then h.admitted_by else excluded.admitted_by end,
        generation = h.generation + 1,
        state = case when h.state = 'lost' then 'up' else h.state end,
        suspended_until = null, suspensions = 0, registered_at = now()
  returning generation into v_generation;
  insert into pgfleet.host_heartbeats (host_id, last_seen, generation)
  values (p_id, now(), v_generation)
  on conflict (host_id) do update set last_seen = now(), generation = excluded.generation;
  -- Readings of an earlier generation's attempts: its next heartbeat sends today's.
  delete from pgfleet.job_usage where host_id = p_id;
  perform pg_notify(pgfleet.work_channel(), pgfleet.all_formations());  -- new capacity
  return v_generation;
end $$;
comment on function pgfleet.register_host(text, text, integer, integer, jsonb, text, text, int4range, text[], text) is
  'Registers (or re-registers) a host; returns its new generation. Its port range (default 20000-32000), the networks it offers (default host and none; bridge where its CNI plugins work) and why not bridge (network_note) are what hostd found. A lost host comes back up. What it offers is what it declares within its admission''s allowances; a new host is admitted at once only for an admin or an auto_admit login (pgfleet.admit_host otherwise).';

-- The labels a host offers: those it declares that its allowance holds
-- (key and value alike), or all of them when it has none.
create or replace function pgfleet.allowed_labels(p_declared jsonb, p_allowed jsonb) returns jsonb
language sql immutable as $$
  select case when p_allowed is null then coalesce(p_declared, '{}')
              else coalesce((select jsonb_object_agg(d.key, d.value)
                               from jsonb_each(coalesce(p_declared, '{}')) d
                              where p_allowed -> d.key = d.value), '{}') end
$$;
comment on function pgfleet.allowed_labels(jsonb, jsonb) is
  'The labels a host offers: the declared ones its allowance (allowed_labels) holds with the same value; all declared when it has no allowance.';

-- An operator admits a host: it may get jobs from now on, offering at most
-- p_cpu, p_memory and the labels of p_labels (each defaulting to what it
-- declares now). Also changes the allowances of an admitted host.
create or replace function pgfleet.admit_host(p_host text, p_cpu integer default null,
                                              p_memory integer default null,
                                              p_labels jsonb default null)
returns void
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  h pgfleet.hosts;
  v_cpu integer;
  v_memory integer;
  v_labels pgfleet.host_labels;
begin
  perform pgfleet.require_role('pgfleet_operator', 'admitting a host');
  if p_cpu is not null and p_cpu <= 0 then
    raise exception 'cpu must be > 0 (got %)', p_cpu using errcode = 'check_violation', column = 'cpu';
  end if;
  if p_memory is not null and p_memory <= 0 then
    raise exception 'memory must be > 0 (got %)', p_memory
      using errcode = 'check_violation', column = 'memory';
  end if;
  v_labels := p_labels;  -- the hosts' own rule (domain host_labels) names a bad one
  select * into h from pgfleet.hosts where id = p_host for update;
  if not found then
    raise exception 'host % does not exist (its hostd registers it first)', p_host
      using errcode = 'no_data_found';
  end if;
  h.allowed_cpu := coalesce(p_cpu, h.declared_cpu, h.cpu);
  h.allowed_memory := coalesce(p_memory, h.declared_memory, h.memory);
  h.allowed_labels := coalesce(v_labels, h.declared_labels, h.labels);
  v_cpu := least(coalesce(h.declared_cpu, h.cpu), h.allowed_cpu);
  v_memory := least(coalesce(h.declared_memory, h.memory), h.allowed_memory);
  if h.cpu_allocated > v_cpu or h.memory_allocated > v_memory then
    raise exception 'host % cannot be given cpu %m and memory % MiB: its jobs hold %m and % MiB (stop or move them first)',
      p_host, v_cpu, v_memory, h.cpu_allocated, h.memory_allocated
      using errcode = 'check_violation';
  end if;
  update pgfleet.hosts
     set admitted = true, admitted_at = coalesce(admitted_at, now()),
         admitted_by = pgfleet.caller(),
         allowed_cpu = h.allowed_cpu, allowed_memory = h.allowed_memory,
         allowed_labels = h.allowed_labels,
         cpu = v_cpu, memory = v_memory,
         labels = pgfleet.allowed_labels(coalesce(h.declared_labels, h.labels), h.allowed_labels)
   where id = p_host;
  perform pg_notify(pgfleet.work_channel(), pgfleet.all_formations());
end $$;
comment on function pgfleet.admit_host(text, integer, integer, jsonb) is
  'Operator control: the host may get jobs, offering at most p_cpu millicores, p_memory MiB and the labels of p_labels (each defaulting to what it declares now); on an admitted host, changes those allowances.';

-- heartbeat and host_jobs are PL/pgSQL, which keeps their plans for the
-- session (docs/decisions/0002).
-- A hostd of an earlier version calls it with three arguments (no
-- condition) or four (no usage): the defaults take them.
create or replace function pgfleet.heartbeat(p_host text, p_generation bigint, p_running integer,
                                             p_condition text default null,
                                             p_usage jsonb default null)
returns table (state text, generation bigint, live_digest text, stops integer)
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
#variable_conflict use_column
declare
  v_had text;
  v_live boolean;
begin
  perform pgfleet.require_host(p_host);
  -- Most heartbeats leave the condition as it was: one row by its key.
  update pgfleet.host_heartbeats hb
     set last_seen = now(), running_jobs = p_running
   where hb.host_id = p_host and hb.generation = p_generation
     and hb.condition is not distinct from nullif(p_condition, '');
  if not found then
    -- A condition that changes: the row as it was (was) gives the one replaced.
    update pgfleet.host_heartbeats hb
       set last_seen = now(), running_jobs = p_running, condition = nullif(p_condition, '')
      from pgfleet.host_heartbeats was
     where hb.host_id = p_host and hb.generation = p_generation and was.host_id = hb.host_id
    returning was.condition into v_had;
  end if;
  -- Live usage (hostd --usage-interval), when this heartbeat carries it: what
  -- the host runs now replaces what it ran at its previous reading.
  if found and p_usage is not null then
    perform pgfleet.record_usage(p_host, p_usage);
  end if;
  -- A condition that cleared gives capacity back: wake sleeping schedulers.
  if v_had is not null and nullif(p_condition, '') is null then
    perform pgfleet.wake_schedulers(array[pgfleet.all_formations()]);
  end if;
  -- With the database's view of the host's live attempts, so that hostd
  -- reconciles only when its own differs (or stops are wanted)
  -- (docs/decisions/0010). live_digest: the XOR over the live attempts
  -- (assigned or running) of the first 64 bits of md5("id/attempt/uid"), as
  -- a signed number in text ("0" for none); hostd computes the same over the
  -- attempts it runs (Agent::ViewDiffers). Only a host with an allocation has
  -- live attempts (allocations are their sum: pgfleet.allocation_drift), so
  -- only such a host's are read.
  select h.state::text, h.generation, h.cpu_allocated > 0 or h.memory_allocated > 0
    into state, generation, v_live
    from pgfleet.hosts h where h.id = p_host;
  if not found then
    return;
  end if;
  live_digest := '0';
  stops := 0;
  if v_live then
    select coalesce(bit_xor(('x' || left(md5(j.id || '/' || j.attempt || '/' || coalesce(j.uid::text, '')),
                                          16))::bit(64)::bigint), 0)::text,
           (count(*) filter (where j.desired_state = 'stop'))::integer
      into live_digest, stops
      from pgfleet.jobs j
     where j.host_id = p_host and j.state in ('assigned', 'running');
  end if;
  return next;
end $$;
comment on function pgfleet.heartbeat(text, bigint, integer, text, jsonb) is
  'Records a heartbeat from the host''s current generation, with its condition (null or empty: it takes new work) and, every --usage-interval, the live usage of its running attempts (pgfleet.record_usage); returns the host''s state and generation as the database sees them, a digest of its live attempts (XOR of the first 64 bits of md5("id/attempt/uid")) and how many of them are asked to stop.';

-- p_usage: [{"job":1,"attempt":1,"cpu_cores":0.5,"memory_bytes":1048576}, ...],
-- every attempt the host runs. Elements that are not of that shape are
-- skipped, never an error: a heartbeat must not fail over a reading.
-- PL/pgSQL, not SQL, so the statement's plan is kept for the session.
create or replace function pgfleet.record_usage(p_host text, p_usage jsonb) returns void
language plpgsql as $$
begin
  with u as (
    select distinct on (job, attempt) job, attempt, cpu, mem
      from (select (e ->> 'job')::bigint as job, (e ->> 'attempt')::integer as attempt,
                   (e ->> 'cpu_cores')::real as cpu,
                   (e ->> 'memory_bytes')::bigint as mem
              from jsonb_array_elements(case jsonb_typeof(p_usage) when 'array' then p_usage
                                                                   else '[]' end) e
             where jsonb_typeof(e) = 'object'
               and (e ->> 'job') ~ '^[1-9][0-9]{0,17}$' and (e ->> 'attempt') ~ '^[1-9][0-9]{0,8}$'
               and case jsonb_typeof(e -> 'cpu_cores') when 'number'
                        then (e ->> 'cpu_cores')::numeric between 0 and 1e6 else false end
               and (e ->> 'memory_bytes') ~ '^[0-9]{1,18}$') x
  ),
  gone as (
    delete from pgfleet.job_usage j
     where j.host_id = p_host
       and not exists (select 1 from u where u.job = j.job_id and u.attempt = j.attempt)
  )
  insert into pgfleet.job_usage as j (job_id, attempt, host_id, cpu_cores, memory_bytes, sampled_at)
  select u.job, u.attempt, p_host, u.cpu, u.mem, now() from u
  on conflict (job_id, attempt, host_id) do update
     set cpu_cores = excluded.cpu_cores, memory_bytes = excluded.memory_bytes,
         sampled_at = excluded.sampled_at;
end $$;
comment on function pgfleet.record_usage(text, jsonb) is
  'Replaces host p_host''s rows of pgfleet.job_usage by the readings in p_usage (called by pgfleet.heartbeat, which checks the host).';
revoke execute on function pgfleet.record_usage(text, jsonb) from public;

create or replace function pgfleet.set_host_state(p_host text, p_state text) returns void
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  perform pgfleet.require_role('pgfleet_operator', 'changing a host''s state');
  if p_state not in ('up', 'draining', 'offline') then
    raise exception 'host state must be up, draining or offline (got %)', p_state
      using errcode = 'check_violation';
  end if;
  update pgfleet.hosts set state = p_state, drain_deadline = null where id = p_host;
  if not found then
    raise exception 'host % does not exist', p_host using errcode = 'no_data_found';
  end if;
  perform pg_notify(pgfleet.work_channel(), pgfleet.all_formations());
end $$;
comment on function pgfleet.set_host_state(text, text) is
  'Operator control: up, draining (no new work) or offline.';

create or replace function pgfleet.drain(p_host text, p_deadline interval default null) returns void
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  perform pgfleet.require_role('pgfleet_operator', 'draining a host');
  if p_deadline is not null and p_deadline < interval '0' then
    raise exception 'deadline must be >= 0 (got %)', p_deadline using errcode = 'check_violation';
  end if;
  perform pgfleet.set_host_state(p_host, 'draining');
  update pgfleet.hosts set drain_deadline = now() + p_deadline where id = p_host;
end $$;
comment on function pgfleet.drain(text, interval) is
  'Drains a host: no new placements; service replicas move elsewhere (started there first, then stopped here); batch jobs run to completion, or are stopped and requeued elsewhere once p_deadline has passed.';

create or replace function pgfleet.evict_overdue_drains() returns integer
language plpgsql as $$
declare
  v_count integer;
begin
  -- Almost always no host is past a drain deadline: asking the hosts first
  -- spares the join over every live job (6 ms a call in a burst on 1,000
  -- hosts with 10,000 jobs running,
  -- docs/benchmarks/2026-11-26-history-pooler-fleet-at-rest.md).
  if not exists (select 1 from pgfleet.hosts h where h.state = 'draining' and h.drain_deadline < now()) then
    return 0;
  end if;
  -- Lock order: jobs before hosts.
  -- A service's replicas are not evicted: they leave only once their
  -- replacements run elsewhere (the formation pass), so a deadline never
  -- takes a service below its replicas; while none can be placed the drain
  -- waits, and host_status.drain_waiting_for says for what.
  with overdue as (
    select j.id, j.attempt, j.host_id from pgfleet.jobs j join pgfleet.hosts h on h.id = j.host_id
     where h.state = 'draining' and h.drain_deadline < now()
       and j.state in ('assigned', 'running') and j.desired_state = 'run'
       and not exists (select 1 from pgfleet.formations f
                        where f.name = j.formation and f.kind = 'service')
       for update of j
  ), stopped as (
    update pgfleet.jobs x set desired_state = 'stop', requeue_on_stop = true
      from overdue o where x.id = o.id
    returning x.id, x.attempt, x.host_id
  ), events as (
    insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
    select s.id, s.attempt, 'stop_requested', s.host_id, 'drain deadline passed: moving elsewhere' from stopped s
  )
  select count(*) into v_count from stopped;
  return v_count;
end $$;
comment on function pgfleet.evict_overdue_drains() is
  'Stops the batch jobs still running on draining hosts past their drain deadline, to be requeued elsewhere once stopped (a service''s replicas leave only once their replacements run). Returns how many.';

create or replace function pgfleet.host_jobs(p_host text)
returns setof pgfleet.jobs
language plpgsql stable security definer set search_path = pgfleet, pg_temp as $$
begin
  perform pgfleet.require_host(p_host);
  return query
    select * from pgfleet.jobs j where j.host_id = p_host and j.state in ('assigned', 'running') order by j.id;
end $$;
comment on function pgfleet.host_jobs(text) is 'Jobs the database says the host should be running (assigned or running).';
