-- Functions re-created on every `pgfleet migrate`. Every job state transition
-- in pgfleet goes through one of these: a guarded UPDATE (expected state,
-- attempt and host), one job_events row, and the host's allocated resources
-- adjusted in the same statement or transaction.

-- schema_migrations is created by the migrate runner (core/db/migrate.cpp) before
-- any migration runs, so it is documented here, re-applied on every migrate.
comment on table pgfleet.schema_migrations is
  'Migrations of migrations/ already applied to this database, one row each; written by `pgfleet migrate`.';
comment on column pgfleet.schema_migrations.name is 'File name of the applied migration, e.g. 0001_init.sql.';
comment on column pgfleet.schema_migrations.applied_at is 'When it was applied.';

create or replace function pgfleet.lock_class() returns integer
language sql immutable parallel safe as $$ select 1885824628 $$;  -- 0x70676674, 'pgft'
comment on function pgfleet.lock_class() is
  'First key of every pgfleet advisory lock (two-integer form). Must equal kLockClass in core/db/constants.h.';

create or replace function pgfleet.setting(p_name text, p_default text) returns text
language sql stable as $$
  select coalesce((select value from pgfleet.settings where name = p_name), p_default)
$$;
comment on function pgfleet.setting(text, text) is 'A value of pgfleet.settings, or the given default.';

create or replace function pgfleet.host_ttl() returns interval
language sql stable as $$
  select make_interval(secs => pgfleet.setting('host_ttl_seconds', '10')::double precision)
$$;
comment on function pgfleet.host_ttl() is
  'How long a host may go without a heartbeat before it is lost (settings.host_ttl_seconds, default 10 s).';

create or replace function pgfleet.retry_backoff(p_failures integer) returns interval
language sql immutable as $$
  select make_interval(secs => least(300, power(2, greatest(p_failures, 1) - 1)))
$$;
comment on function pgfleet.retry_backoff(integer) is
  'Delay before the next attempt after p_failures consecutive failures: 1 s doubling up to 5 min.';

create or replace function pgfleet.try_lock_formation(p_formation integer) returns boolean
language sql volatile as $$
  select pg_try_advisory_xact_lock(pgfleet.lock_class(), p_formation)
$$;
comment on function pgfleet.try_lock_formation(integer) is
  'Takes the formation''s transaction-scoped scheduling lock without waiting; false when another scheduler holds it.';

-- Submission ---------------------------------------------------------------

create or replace function pgfleet.submit(
  command text[],
  formation text default 'default',
  cpu integer default 100,
  memory integer default 64,
  env jsonb default '{}',
  constraints jsonb default '{}',
  priority integer default 50,
  max_attempts integer default 1,
  idempotency_key text default null,
  rootfs text default null,
  run_as text default null,
  network text default 'host',
  pids_max integer default 1024,
  cpu_hard_limit boolean default false,
  stop_grace_seconds integer default 10)
returns bigint
language plpgsql as $$
#variable_conflict use_variable
declare
  v_id bigint;
begin
  if idempotency_key is not null then
    select j.id into v_id from pgfleet.jobs j where j.idempotency_key = submit.idempotency_key;
    if found then return v_id; end if;
  end if;
  insert into pgfleet.jobs as j (command, formation, cpu, memory, env, constraints, priority,
                                 max_attempts, idempotency_key, rootfs, run_as, network, pids_max,
                                 cpu_hard_limit, stop_grace_seconds)
  values (command, formation, cpu, memory, env, constraints, priority, max_attempts,
          idempotency_key, rootfs, run_as, network, pids_max, cpu_hard_limit, stop_grace_seconds)
  on conflict on constraint "idempotency_key must be unique" do nothing
  returning j.id into v_id;
  if v_id is null then  -- a concurrent submit with the same key won
    select j.id into v_id from pgfleet.jobs j where j.idempotency_key = submit.idempotency_key;
  end if;
  return v_id;
end $$;
comment on function pgfleet.submit(text[], text, integer, integer, jsonb, jsonb, integer, integer, text, text, text, text, integer, boolean, integer) is
  'Submits a job and returns its id. With an idempotency_key already used, returns that job''s id and creates nothing.';

create or replace function pgfleet.stop_jobs(p_ids bigint[], p_reason text) returns integer
language plpgsql as $$
declare
  v_count integer;
begin
  -- Pending jobs are cancelled at once; assigned and running ones get
  -- desired_state 'stop' (hostd stops them: SIGTERM, grace, SIGKILL; the exit
  -- report then makes them cancelled). Jobs already final are left alone.
  with target as (
    select j.id from pgfleet.jobs j
     where j.id = any(p_ids) and j.state in ('pending', 'assigned', 'running') and j.desired_state = 'run'
       for update
  ), cancelled as (
    update pgfleet.jobs x set state = 'cancelled', desired_state = 'stop', finished_at = now(), error = p_reason
      from target t where x.id = t.id and x.state = 'pending'
    returning x.id, x.attempt, x.formation
  ), stopping as (
    update pgfleet.jobs x set desired_state = 'stop'
      from target t where x.id = t.id and x.state in ('assigned', 'running')
    returning x.id, x.attempt, x.host_id, x.formation
  ), events as (
    insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
    select c.id, c.attempt, 'cancelled', null, p_reason from cancelled c
    union all
    select s.id, s.attempt, 'stop_requested', s.host_id, p_reason from stopping s
  ), notified as (
    select pg_notify('pgfleet_work', f.id::text) from pgfleet.formations f
     where f.name in (select formation from stopping)
  )
  select (select count(*) from cancelled) + (select count(*) from stopping) + 0 * (select count(*) from notified)
    into v_count;
  return v_count;
end $$;
comment on function pgfleet.stop_jobs(bigint[], text) is
  'Stops jobs for a reason: pending ones are cancelled at once, assigned or running ones are stopped on their host, then cancelled. Returns how many changed.';

create or replace function pgfleet.cancel(p_job bigint) returns text
language plpgsql as $$
declare
  v_state text;
begin
  perform pgfleet.stop_jobs(array[p_job], 'cancelled by user');
  select case when state in ('assigned', 'running') and desired_state = 'stop' then 'stopping' else state end
    into v_state from pgfleet.jobs where id = p_job;
  if not found then
    raise exception 'job % does not exist', p_job using errcode = 'no_data_found';
  end if;
  return v_state;
end $$;
comment on function pgfleet.cancel(bigint) is
  'Cancels a job: a pending job becomes cancelled at once; an assigned or running one is stopped on its host, then cancelled. Returns cancelled, stopping, or the final state it already had.';

create or replace function pgfleet.scale(p_formation text, p_replicas integer) returns void
language plpgsql as $$
declare
  v_id integer;
begin
  if p_replicas < 0 then
    raise exception 'replicas must be >= 0 (got %)', p_replicas using errcode = 'check_violation';
  end if;
  update pgfleet.formations set replicas = p_replicas, updated_at = now()
   where name = p_formation and kind = 'service'
  returning id into v_id;
  if v_id is null then
    raise exception 'no service formation named %', p_formation using errcode = 'no_data_found';
  end if;
  perform pg_notify('pgfleet_work', v_id::text);
end $$;
comment on function pgfleet.scale(text, integer) is 'Sets how many replicas a service formation keeps running.';

-- Hosts ---------------------------------------------------------------------

create or replace function pgfleet.register_host(p_id text, p_api_url text, p_cpu integer,
                                                 p_memory integer, p_labels jsonb,
                                                 p_driver text, p_driver_note text)
returns bigint
language plpgsql as $$
declare
  v_generation bigint;
  v_old pgfleet.hosts;
begin
  select * into v_old from pgfleet.hosts where id = p_id;
  if found and (v_old.cpu_allocated > p_cpu or v_old.memory_allocated > p_memory) then
    raise exception 'host % cannot register with cpu %m and memory % MiB: its jobs hold %m and % MiB (stop or move them first)',
      p_id, p_cpu, p_memory, v_old.cpu_allocated, v_old.memory_allocated
      using errcode = 'check_violation';
  end if;
  insert into pgfleet.hosts as h (id, api_url, cpu, memory, labels, driver, driver_note)
  values (p_id, p_api_url, p_cpu, p_memory, coalesce(p_labels, '{}'), p_driver, p_driver_note)
  on conflict (id) do update
    set api_url = excluded.api_url, cpu = excluded.cpu, memory = excluded.memory,
        labels = excluded.labels, driver = excluded.driver, driver_note = excluded.driver_note,
        generation = h.generation + 1,
        state = case when h.state = 'lost' then 'up' else h.state end,
        suspended_until = null, suspensions = 0, registered_at = now()
  returning generation into v_generation;
  insert into pgfleet.host_heartbeats (host_id, last_seen, generation)
  values (p_id, now(), v_generation)
  on conflict (host_id) do update set last_seen = now(), generation = excluded.generation;
  perform pg_notify('pgfleet_work', '*');  -- new capacity
  return v_generation;
end $$;
comment on function pgfleet.register_host(text, text, integer, integer, jsonb, text, text) is
  'Registers (or re-registers) a host; returns its new generation. A lost host comes back up.';

create or replace function pgfleet.heartbeat(p_host text, p_generation bigint, p_running integer)
returns table (state text, generation bigint)
language sql as $$
  with hb as (
    update pgfleet.host_heartbeats set last_seen = now(), running_jobs = p_running
     where host_id = p_host and host_heartbeats.generation = p_generation
  )
  select h.state, h.generation from pgfleet.hosts h where h.id = p_host
$$;
comment on function pgfleet.heartbeat(text, bigint, integer) is
  'Records a heartbeat from the host''s current generation; returns the host''s state and generation as the database sees them.';

create or replace function pgfleet.set_host_state(p_host text, p_state text) returns void
language plpgsql as $$
begin
  if p_state not in ('up', 'draining', 'offline') then
    raise exception 'host state must be up, draining or offline (got %)', p_state
      using errcode = 'check_violation';
  end if;
  update pgfleet.hosts set state = p_state, drain_deadline = null where id = p_host;
  if not found then
    raise exception 'host % does not exist', p_host using errcode = 'no_data_found';
  end if;
  perform pg_notify('pgfleet_work', '*');
end $$;
comment on function pgfleet.set_host_state(text, text) is
  'Operator control: up, draining (no new work) or offline.';

drop function if exists pgfleet.drain(text);
create or replace function pgfleet.drain(p_host text, p_deadline interval default null) returns void
language plpgsql as $$
begin
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
  -- Lock order: jobs before hosts.
  with overdue as (
    select j.id, j.attempt, j.host_id from pgfleet.jobs j join pgfleet.hosts h on h.id = j.host_id
     where h.state = 'draining' and h.drain_deadline < now()
       and j.state in ('assigned', 'running') and j.desired_state = 'run'
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
  'Stops the jobs still running on draining hosts past their drain deadline, to be requeued elsewhere once stopped. Returns how many.';

-- Scheduling ----------------------------------------------------------------

create or replace function pgfleet.assign_jobs(p_plan jsonb)
returns table (job_id bigint, attempt integer, host_id text)
language sql as $$
  -- p_plan: [{"job": 1, "host": "h1"}, ...]. Per host, all or nothing: the host's
  -- allocation is raised only if everything planned for it still fits, so a
  -- scheduler that planned against a stale snapshot touches no row for that host
  -- and re-plans those jobs.
  -- A job listed twice counts once (its first entry): otherwise its resources
  -- would be reserved twice but released once (allocation_drift).
  with plan as (
    select distinct on ((e ->> 'job')::bigint) (e ->> 'job')::bigint as job_id, e ->> 'host' as host_id
      from jsonb_array_elements(p_plan) with ordinality as x(e, n)
     order by (e ->> 'job')::bigint, n
  ), claimed as (
    select j.id, p.host_id, j.cpu, j.memory
      from plan p join pgfleet.jobs j on j.id = p.job_id
     where j.state = 'pending' and j.desired_state = 'run'
     for update of j
  ), need as (
    select c.host_id, sum(c.cpu)::integer as cpu, sum(c.memory)::integer as memory
      from claimed c group by c.host_id
  ), host_locks as (
    -- Hosts are locked in id order so concurrent schedulers never deadlock.
    select h.id from pgfleet.hosts h where h.id in (select host_id from need) order by h.id for update
  ), reserved as (
    update pgfleet.hosts h
       set cpu_allocated = h.cpu_allocated + n.cpu,
           memory_allocated = h.memory_allocated + n.memory
      from need n
     where h.id = n.host_id and h.id in (select id from host_locks) and h.state = 'up'
       and (h.suspended_until is null or h.suspended_until <= now())
       and h.cpu_allocated + n.cpu <= h.cpu
       and h.memory_allocated + n.memory <= h.memory
    returning h.id
  ), assigned as (
    update pgfleet.jobs j
       set state = 'assigned', host_id = c.host_id, attempt = j.attempt + 1,
           assigned_at = now(), started_at = null, pid = null, error = null
      from claimed c
     where j.id = c.id and c.host_id in (select id from reserved) and j.state = 'pending'
    returning j.id, j.attempt, j.host_id
  ), events as (
    insert into pgfleet.job_events (job_id, attempt, kind, host_id)
    select a.id, a.attempt, 'assigned', a.host_id from assigned a
  )
  select a.id, a.attempt, a.host_id from assigned a
$$;
comment on function pgfleet.assign_jobs(jsonb) is
  'Writes a placement plan [{"job":id,"host":id}]: pending jobs become assigned (attempt + 1) and hosts'' allocations grow, all-or-nothing per host. Returns what was assigned.';

create or replace function pgfleet.set_pending_reasons(p_reasons jsonb) returns integer
language sql as $$
  with r as (
    select (e ->> 'job')::bigint as job_id, e ->> 'reason' as reason
      from jsonb_array_elements(p_reasons) e
  ), u as (
    update pgfleet.jobs j set error = r.reason
      from r where j.id = r.job_id and j.state = 'pending' and j.error is distinct from r.reason
    returning 1
  )
  select count(*)::integer from u
$$;
comment on function pgfleet.set_pending_reasons(jsonb) is
  'Records why pending jobs could not be placed ([{"job":id,"reason":text}]) in jobs.error.';

create or replace function pgfleet.dispatch_failed(p_host text, p_jobs jsonb, p_error text)
returns integer
language plpgsql as $$
declare
  v_count integer;
begin
  -- p_jobs: [{"job": 1, "attempt": 1}, ...]
  with req as (
    select (e ->> 'job')::bigint as job_id, (e ->> 'attempt')::integer as attempt
      from jsonb_array_elements(p_jobs) e
  ), back as (
    update pgfleet.jobs j set state = 'pending', error = 'dispatch to host ' || p_host || ' failed: ' || p_error
      from req
     where j.id = req.job_id and j.attempt = req.attempt and j.host_id = p_host and j.state = 'assigned'
    returning j.id, j.attempt, j.cpu, j.memory, j.formation
  ), freed as (
    update pgfleet.hosts h
       set cpu_allocated = h.cpu_allocated - s.cpu, memory_allocated = h.memory_allocated - s.memory,
           suspensions = h.suspensions + 1,
           suspended_until = now() + make_interval(secs => least(60, power(2, h.suspensions)))
      from (select coalesce(sum(cpu), 0)::integer as cpu, coalesce(sum(memory), 0)::integer as memory
              from back) s
     where h.id = p_host
  ), events as (
    insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
    select b.id, b.attempt, 'requeued', p_host, 'dispatch failed: ' || p_error from back b
  )
  select count(*) into v_count from back;
  perform pg_notify('pgfleet_work', '*');
  return v_count;
end $$;
comment on function pgfleet.dispatch_failed(text, jsonb, text) is
  'The scheduler could not deliver these assigned attempts to the host: they go back to pending (to be placed elsewhere), their resources are freed, and the host is suspended with exponential backoff.';

create or replace function pgfleet.dispatch_succeeded(p_host text) returns void
language sql as $$
  update pgfleet.hosts set suspensions = 0 where id = p_host and suspensions <> 0
$$;
comment on function pgfleet.dispatch_succeeded(text) is 'Resets a host''s suspension backoff after a delivered dispatch.';

-- Reports from hosts ---------------------------------------------------------

create or replace function pgfleet.describe_exit(p_exit_code integer, p_signal integer,
                                                  p_oom boolean, p_error text)
returns text
language sql immutable as $$
  select case
    when p_error is not null and p_error <> '' then p_error
    when p_oom then 'out of memory'
    when p_signal is not null then 'killed by signal ' || p_signal
    else 'exit code ' || coalesce(p_exit_code::text, 'unknown')
  end
$$;
comment on function pgfleet.describe_exit(integer, integer, boolean, text) is 'An attempt''s outcome in words.';

create or replace function pgfleet.report_jobs(p_host text, p_generation bigint, p_reports jsonb)
returns table (job_id bigint, attempt integer, kind text, accepted boolean)
language plpgsql as $$
-- p_reports, in the order they happened:
--   {"job":1,"attempt":1,"kind":"running","pid":123}
--   {"job":1,"attempt":1,"kind":"exited","exit_code":0,"signal":null,"oom_killed":false,
--    "peak_memory_bytes":1,"cpu_seconds":0.1,"output_tail":"...","error":null}
--   {"job":1,"attempt":1,"kind":"start_failed","error":"exec \"foo\": No such file"}
-- Each report is applied only if the attempt is still the job's current one on this
-- host (fencing); accepted = false tells the host its attempt was superseded.
declare
  r jsonb;
  j pgfleet.jobs;
  v_kind text;
  v_ok boolean;
  v_service boolean;
  v_state text;
  v_failures integer;
  v_detail text;
  v_free_cpu integer := 0;
  v_free_memory integer := 0;
  v_generation bigint;
begin
  select h.generation into v_generation from pgfleet.hosts h where h.id = p_host;
  for r in select * from jsonb_array_elements(p_reports) loop
    job_id := (r ->> 'job')::bigint;
    attempt := (r ->> 'attempt')::integer;
    kind := r ->> 'kind';
    v_kind := kind;
    select * into j from pgfleet.jobs x
     where x.id = job_id and x.attempt = report_jobs.attempt and x.host_id = p_host
       and x.state in ('assigned', 'running')
       for update;
    if not found or v_generation is distinct from p_generation then
      accepted := false;
      return next;
      continue;
    end if;
    accepted := true;

    if j.state = 'assigned' and v_kind in ('running', 'exited') then
      update pgfleet.jobs x set state = 'running', started_at = now(), pid = (r ->> 'pid')::integer
       where x.id = j.id and x.attempt = j.attempt and x.state = 'assigned';
      insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
      values (j.id, j.attempt, 'running', p_host, 'pid ' || coalesce(r ->> 'pid', 'unknown'));
      j.state := 'running';
      j.started_at := now();
    end if;

    if v_kind = 'lost' then
      update pgfleet.jobs x
         set state = case when x.desired_state = 'stop' then 'cancelled'
                          when x.host_losses + 1 >= 3 then 'failed' else 'pending' end,
             host_losses = x.host_losses + 1,
             error = 'attempt ' || x.attempt || ' lost on host ' || p_host || ': ' || coalesce(r ->> 'error', 'unknown'),
             finished_at = case when x.desired_state = 'stop' or x.host_losses + 1 >= 3 then now() end
       where x.id = j.id and x.attempt = j.attempt and x.state in ('assigned', 'running')
      returning x.state into v_state;
      v_free_cpu := v_free_cpu + j.cpu;
      v_free_memory := v_free_memory + j.memory;
      insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
      values (j.id, j.attempt, 'lost', p_host,
              coalesce(r ->> 'error', 'unknown') || case when v_state = 'failed' then '; lost 3 times, giving up' else '' end);
    elsif v_kind in ('exited', 'start_failed') then
      v_ok := v_kind = 'exited' and (r ->> 'exit_code')::integer = 0
              and (r ->> 'signal') is null and not coalesce((r ->> 'oom_killed')::boolean, false);
      select f.kind = 'service' into v_service from pgfleet.formations f where f.name = j.formation;
      v_failures := j.failures;
      -- A service replica that stayed up 10 minutes starts its backoff afresh.
      if v_service and j.started_at is not null and j.started_at < now() - interval '10 minutes' then
        v_failures := 0;
      end if;
      if j.desired_state = 'stop' and j.requeue_on_stop then
        v_state := 'pending';  -- stopped to move it (drain deadline): not the job's fault
      elsif j.desired_state = 'stop' then
        v_state := 'cancelled';
      elsif v_ok and not v_service then
        v_state := 'succeeded';
      elsif v_service then
        v_state := 'pending';
        v_failures := v_failures + 1;
      else
        v_failures := v_failures + 1;
        v_state := case when v_failures < j.max_attempts then 'pending' else 'failed' end;
      end if;
      v_detail := pgfleet.describe_exit((r ->> 'exit_code')::integer, (r ->> 'signal')::integer,
                                        coalesce((r ->> 'oom_killed')::boolean, false), r ->> 'error');
      update pgfleet.jobs x
         set state = v_state,
             failures = v_failures,
             exit_code = (r ->> 'exit_code')::integer,
             signal = (r ->> 'signal')::integer,
             oom_killed = coalesce((r ->> 'oom_killed')::boolean, false),
             peak_memory_bytes = (r ->> 'peak_memory_bytes')::bigint,
             cpu_seconds = (r ->> 'cpu_seconds')::double precision,
             output_tail = r ->> 'output_tail',
             error = case when v_ok then null else v_detail end,
             not_before = case when v_state = 'pending' and not j.requeue_on_stop
                               then now() + pgfleet.retry_backoff(v_failures) end,
             desired_state = case when j.requeue_on_stop then 'run' else x.desired_state end,
             requeue_on_stop = false,
             finished_at = case when v_state <> 'pending' then now() end
       where x.id = j.id and x.attempt = j.attempt and x.state = 'running'
          or x.id = j.id and x.attempt = j.attempt and x.state = 'assigned' and v_kind = 'start_failed';
      v_free_cpu := v_free_cpu + j.cpu;
      v_free_memory := v_free_memory + j.memory;
      insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
      values (j.id, j.attempt, case when v_state = 'pending' then 'requeued' else v_state end, p_host,
              case when v_state = 'pending' and j.requeue_on_stop
                   then 'stopped on a draining host past its deadline; requeued'
                   when v_state = 'pending'
                   then v_detail || '; next attempt in ' || pgfleet.retry_backoff(v_failures)::text
                        || case when v_service then '' else ' (' || v_failures || ' of ' || j.max_attempts || ' failed)' end
                   else v_detail end);
    end if;
    return next;
  end loop;
  -- Resources go back to the host once, after every job row is locked: lock
  -- order is always jobs before hosts (as in the scheduler), so no deadlock.
  if v_free_cpu > 0 or v_free_memory > 0 then
    update pgfleet.hosts h
       set cpu_allocated = h.cpu_allocated - v_free_cpu, memory_allocated = h.memory_allocated - v_free_memory
     where h.id = p_host;
    perform pg_notify('pgfleet_work', '*');
  end if;
end $$;
comment on function pgfleet.report_jobs(text, bigint, jsonb) is
  'Applies a batch of reports from a host (running, exited, start_failed), each guarded by job, attempt, host and state. Frees resources on exit and requeues failed attempts with backoff while attempts remain.';

create or replace function pgfleet.host_jobs(p_host text)
returns setof pgfleet.jobs
language sql stable as $$
  select * from pgfleet.jobs where host_id = p_host and state in ('assigned', 'running') order by id
$$;
comment on function pgfleet.host_jobs(text) is 'Jobs the database says the host should be running (assigned or running).';

create or replace function pgfleet.job_spec(j pgfleet.jobs) returns jsonb
language sql stable as $$
  select jsonb_build_object(
    'command', j.command, 'env', j.env, 'cpu', j.cpu, 'memory', j.memory,
    'constraints', j.constraints, 'priority', j.priority, 'max_attempts', j.max_attempts,
    'formation', j.formation, 'rootfs', j.rootfs, 'user', j.run_as, 'network', j.network,
    'pids_max', j.pids_max, 'cpu_hard_limit', j.cpu_hard_limit,
    'stop_grace_seconds', j.stop_grace_seconds)
$$;
comment on function pgfleet.job_spec(pgfleet.jobs) is
  'The job as the JSON spec hostd runs (the "spec" of POST /v1/jobs); one definition for the scheduler and hostd.';

-- Failures -------------------------------------------------------------------

create or replace function pgfleet.sweep_lost_hosts(p_ttl_seconds double precision)
returns table (host_id text, requeued integer)
language plpgsql as $$
-- Hosts whose last heartbeat, by the database clock, is older than the TTL are
-- marked lost, and their unfinished attempts go back to pending as new attempts
-- with a 'lost' event. A host loss is not the job's fault: it does not count
-- against max_attempts, but a job lost with 3 hosts fails (it may be what
-- kills them). Safe to run from every scheduler at once: the guarded update of
-- the host row lets exactly one win each host. Lock order: jobs before hosts.
declare
  h record;
  v_count integer;
  v_ttl interval := make_interval(secs => p_ttl_seconds);
begin
  for h in
    select x.id from pgfleet.hosts x join pgfleet.host_heartbeats hb on hb.host_id = x.id
     where x.state <> 'lost' and hb.last_seen < now() - v_ttl
     order by x.id
  loop
    perform 1 from pgfleet.jobs j where j.host_id = h.id and j.state in ('assigned', 'running') for update;
    update pgfleet.hosts x set state = 'lost'
     where x.id = h.id and x.state <> 'lost'
       and exists (select 1 from pgfleet.host_heartbeats hb where hb.host_id = x.id and hb.last_seen < now() - v_ttl);
    if not found then
      continue;  -- another scheduler won it, or the heartbeat came back
    end if;
    with moved as (
      update pgfleet.jobs j
         set state = case when j.desired_state = 'stop' then 'cancelled'
                          when j.host_losses + 1 >= 3 then 'failed' else 'pending' end,
             host_losses = j.host_losses + 1,
             error = 'host ' || h.id || ' lost (no heartbeat for ' || p_ttl_seconds || ' s)'
                     || case when j.host_losses + 1 >= 3 and j.desired_state = 'run' then '; lost 3 times, giving up' else '' end,
             finished_at = case when j.desired_state = 'stop' or j.host_losses + 1 >= 3 then now() end,
             not_before = null
       where j.host_id = h.id and j.state in ('assigned', 'running')
      returning j.id, j.attempt, j.cpu, j.memory, j.state
    ), freed as (
      update pgfleet.hosts x
         set cpu_allocated = x.cpu_allocated - s.cpu, memory_allocated = x.memory_allocated - s.memory
        from (select coalesce(sum(cpu), 0)::integer as cpu, coalesce(sum(memory), 0)::integer as memory from moved) s
       where x.id = h.id
    ), events as (
      insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
      select m.id, m.attempt, 'lost', h.id,
             'host lost (no heartbeat for ' || p_ttl_seconds || ' s); now ' || m.state from moved m
    )
    select count(*) into v_count from moved;
    host_id := h.id;
    requeued := v_count;
    perform pg_notify('pgfleet_work', '*');
    return next;
  end loop;
end $$;
comment on function pgfleet.sweep_lost_hosts(double precision) is
  'Marks hosts without a heartbeat for p_ttl_seconds as lost and requeues their unfinished attempts as new attempts. Idempotent; one caller wins each host.';

create or replace function pgfleet.prune_finished(p_older_than interval, p_batch integer) returns integer
language sql as $$
  with old as (
    select id from pgfleet.jobs
     where finished_at < now() - p_older_than and state in ('succeeded', 'failed', 'cancelled')
     order by finished_at limit p_batch
     for update skip locked
  ), gone as (
    delete from pgfleet.jobs j using old where j.id = old.id returning 1
  )
  select count(*)::integer from gone
$$;
comment on function pgfleet.prune_finished(interval, integer) is
  'Deletes up to p_batch finished jobs (and, by cascade, their events) that finished before now() - p_older_than. Returns how many.';
