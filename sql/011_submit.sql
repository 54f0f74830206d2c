-- Submission and user control of jobs and formations: submit, stop, cancel, scale.

-- Every option defaults to null, meaning "the column's default": the job
-- defaults are defined once, by the columns of pgfleet.jobs (migrations/), and
-- a null is never written over them.
create or replace function pgfleet.submit(
  command text[],
  formation text default null,
  cpu integer default null,
  memory integer default null,
  env jsonb default null,
  constraints jsonb default null,
  priority integer default null,
  max_attempts integer default null,
  idempotency_key text default null,
  rootfs text default null,
  run_as text default null,
  network text default null,
  pids_max integer default null,
  cpu_hard_limit boolean default null,
  stop_grace_seconds integer default null,
  disk integer default null,
  seccomp text default null,
  health_check jsonb default null,
  ports jsonb default null,
  after bigint[] default null,
  not_before timestamptz default null,
  files jsonb default null,
  preemptible boolean default null)
returns bigint
language plpgsql as $$
#variable_conflict use_variable
declare
  v_id bigint;
  v_given jsonb;  -- the options given (not null), column -> value
  v_columns text;
begin
  -- Keys are per owner (the job's owner is current_user, the column's default).
  if idempotency_key is not null then
    select j.id into v_id from pgfleet.jobs j
     where j.owner = current_user and j.idempotency_key = submit.idempotency_key;
    if found then return v_id; end if;
  end if;
  select coalesce(jsonb_object_agg(o.key, o.value), '{}'), string_agg(format(', %I', o.key), '')
    into v_given, v_columns
    from jsonb_each(jsonb_build_object(
           'formation', formation, 'cpu', cpu, 'memory', memory, 'env', env,
           'constraints', constraints, 'priority', priority, 'max_attempts', max_attempts,
           'idempotency_key', idempotency_key, 'rootfs', rootfs, 'run_as', run_as,
           'network', network, 'pids_max', pids_max, 'cpu_hard_limit', cpu_hard_limit,
           'stop_grace_seconds', stop_grace_seconds, 'disk', disk,
           'seccomp', seccomp, 'health_check', health_check, 'ports', ports,
           'after', after, 'not_before', not_before, 'files', files,
           'preemptible', preemptible)) o
   where o.value <> 'null';
  -- Only the given columns are listed, so the others take their defaults.
  execute format('insert into pgfleet.jobs as j (command%s) select $1%s'
                 ' from jsonb_populate_record(null::pgfleet.jobs, $2) r'
                 ' on conflict (owner, idempotency_key) where idempotency_key is not null do nothing'
                 ' returning j.id', v_columns, replace(v_columns, ', ', ', r.'))
    into v_id using command, v_given;
  if v_id is null then  -- a concurrent submit of this owner with the same key won
    select j.id into v_id from pgfleet.jobs j
     where j.owner = current_user and j.idempotency_key = submit.idempotency_key;
  end if;
  return v_id;
end $$;
comment on function pgfleet.submit(text[], text, integer, integer, jsonb, jsonb, integer, integer, text, text, text, text, integer, boolean, integer, integer, text, jsonb, jsonb, bigint[], timestamptz, jsonb, boolean) is
  'Submits a job and returns its id. An option left out or null takes the default of its pgfleet.jobs column. With an idempotency_key already used, returns that job''s id and creates nothing. after: jobs that must succeed first; not_before: no start before then (docs/dependencies.md); files: small files written into its sandbox (docs/files.md); preemptible: false keeps a higher-priority job from stopping it (docs/preemption.md).';

create or replace function pgfleet.stop_jobs(p_ids bigint[], p_reason text) returns integer
language plpgsql as $$
declare
  v_count integer;
  v_cancelled bigint[];
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
    select pg_notify(pgfleet.work_channel(), f.id::text) from pgfleet.formations f
     where f.name in (select formation from stopping)
  ), waiters as (
    select pgfleet.notify_waiters(array(select id from cancelled))
  )
  select (select count(*) from cancelled) + (select count(*) from stopping)
         + 0 * (select count(*) from notified) + 0 * (select count(*) from waiters),
         array(select id from cancelled)
    into v_count, v_cancelled;
  -- The jobs after a cancelled one fail (sql/024_dependencies.sql).
  perform pgfleet.settle_dependents_of(v_cancelled);
  return v_count;
end $$;
comment on function pgfleet.stop_jobs(bigint[], text) is
  'Stops jobs for a reason: pending ones are cancelled at once, assigned or running ones are stopped on their host, then cancelled. Returns how many changed.';

create or replace function pgfleet.cancel(p_job bigint, p_force boolean default false) returns text
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_state text;
begin
  -- Only the job's owner, or an operator, may cancel it; to anyone else it
  -- does not exist (a submitter cannot learn which ids are others').
  if not exists (select 1 from pgfleet.jobs j where j.id = p_job
                    and (j.owner = pgfleet.caller() or pgfleet.has_role(pgfleet.caller(), 'pgfleet_operator'))) then
    raise exception 'job % does not exist, or is not yours (only its owner or a pgfleet_operator may cancel it)', p_job
      using errcode = 'no_data_found';
  end if;
  if p_force then
    -- Marked first, so a job already stopping (SIGTERM sent, its grace
    -- running) is killed now too.
    with forced as (
      update pgfleet.jobs j set stop_force = true, desired_state = 'stop'
       where j.id = p_job and j.state in ('assigned', 'running') and not j.stop_force
      returning j.id, j.attempt, j.host_id, j.formation
    ), events as (
      insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
      select f.id, f.attempt, 'stop_requested', f.host_id, 'force-stopped by user: killed at once' from forced f
    )
    select pg_notify(pgfleet.work_channel(), fm.id::text) into v_state
      from forced f join pgfleet.formations fm on fm.name = f.formation;
  end if;
  perform pgfleet.stop_jobs(array[p_job], 'cancelled by user');
  select case when state in ('assigned', 'running') and desired_state = 'stop' then 'stopping' else state end
    into v_state from pgfleet.jobs where id = p_job;
  if not found then
    raise exception 'job % does not exist', p_job using errcode = 'no_data_found';
  end if;
  return v_state;
end $$;
comment on function pgfleet.cancel(bigint, boolean) is
  'Cancels a job: a pending job becomes cancelled at once; an assigned or running one is stopped on its host (SIGTERM, its stop_grace_seconds, SIGKILL; with p_force SIGKILL at once, also when a stop is already under way), then cancelled. Returns cancelled, stopping, or the final state it already had.';

create or replace function pgfleet.force_stop(p_job bigint) returns text
language sql security definer set search_path = pgfleet, pg_temp as $$
  select pgfleet.cancel(p_job, true)
$$;
comment on function pgfleet.force_stop(bigint) is
  'Stops a job at once: pgfleet.cancel(job, force => true). Its host kills it (SIGKILL) without waiting out stop_grace_seconds.';

create or replace function pgfleet.scale(p_formation text, p_replicas integer) returns void
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_id integer;
begin
  perform pgfleet.require_role('pgfleet_operator', 'scaling a formation');
  if p_replicas < 0 then
    raise exception 'replicas must be >= 0 (got %)', p_replicas using errcode = 'check_violation';
  end if;
  if exists (select 1 from pgfleet.formations where name = p_formation and deleted_at is not null) then
    raise exception 'formation % was deleted: create it again (pgfleet formation create) to scale it', p_formation
      using errcode = 'check_violation', column = 'replicas';
  end if;
  update pgfleet.formations set replicas = p_replicas, updated_at = now()
   where name = p_formation and kind = 'service'
  returning id into v_id;
  if v_id is null then
    raise exception 'no service formation named %', p_formation using errcode = 'no_data_found';
  end if;
  perform pg_notify(pgfleet.work_channel(), v_id::text);
end $$;
comment on function pgfleet.scale(text, integer) is 'Sets how many replicas a service formation keeps running.';
