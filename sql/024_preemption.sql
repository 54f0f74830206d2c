-- Preemption (migration 0039, docs/preemption.md): a scheduler's formation
-- pass that finds no host for a pending job chooses victims with the pure
-- core (core/placement/preemption.h) and asks pgfleet.preempt to stop them.
-- The function checks everything again under row locks: the pass read
-- without them, and another scheduler may be choosing from the same jobs.
--
-- What must hold:
-- - Only a victim that is still assigned or running on that host, wanted
--   (desired_state run), preemptible and of strictly lower priority than
--   the pending job is stopped; all of them or none.
-- - A formation with min_available keeps at least that many jobs running:
--   its row is locked while its running jobs are counted, so two schedulers
--   cannot both take its last spare one.
-- - A job whose earlier victims are still stopping preempts no more.
-- - Nothing waits for a row another transaction holds (the caller's pass
--   holds hosts and must never wait: skip locked, and refuse).

create or replace function pgfleet.preempt(p_job bigint, p_host text, p_victims bigint[])
returns integer
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  j pgfleet.jobs;
  v_victims bigint[];
  v_ok integer;
  v_locked integer;
  v_cpu bigint;
  v_memory bigint;
  v_max_priority integer;
  h record;
  f record;
  v_live integer;
  v_taken integer;
  v_budgeted text[];
begin
  perform pgfleet.require_role('pgfleet_scheduler', 'preempting jobs');
  if p_job is null or p_host is null or p_victims is null or cardinality(p_victims) = 0
     or cardinality(p_victims) > 64 or array_position(p_victims, null) is not null then
    raise exception 'preempt needs a job, a host and 1 to 64 victim job ids (got job %, host %, victims %)',
                    coalesce(p_job::text, 'null'), coalesce(p_host, 'null'), coalesce(p_victims::text, 'null')
      using errcode = 'invalid_parameter_value';
  end if;
  v_victims := array(select distinct v from unnest(p_victims) v order by v);
  if p_job = any(v_victims) then
    raise exception 'job % cannot preempt itself', p_job using errcode = 'invalid_parameter_value';
  end if;

  -- The job making room: still pending and wanted (skip locked: another
  -- transaction is assigning or cancelling it).
  select * into j from pgfleet.jobs x
   where x.id = p_job and x.state = 'pending' and x.desired_state = 'run'
     for update skip locked;
  if not found then
    return 0;
  end if;
  -- Its earlier victims still stopping: it waits for them, never preempts twice.
  if j.preempting is not null and exists (
       select 1 from pgfleet.jobs v
        where v.id = any(j.preempting) and v.preempted_by = p_job and v.state in ('assigned', 'running')) then
    return 0;
  end if;

  -- The victims, locked in id order without waiting (one held elsewhere,
  -- e.g. by its own exit report, is not taken), each checked again.
  select count(*), count(*) filter (where l.host_id = p_host and l.state in ('assigned', 'running')
                                      and l.desired_state = 'run' and l.preemptible
                                      and l.priority < j.priority),
         coalesce(sum(l.cpu), 0), coalesce(sum(l.memory), 0), max(l.priority)
    into v_locked, v_ok, v_cpu, v_memory, v_max_priority
    from (select x.* from pgfleet.jobs x where x.id = any(v_victims) order by x.id
             for update skip locked) l;
  if v_locked <> cardinality(v_victims) or v_ok <> cardinality(v_victims) then
    return 0;
  end if;
  -- Stopping them must make room for the job on a host that takes work.
  select x.cpu, x.memory, x.cpu_allocated, x.memory_allocated into h from pgfleet.hosts x
   where x.id = p_host and x.state = 'up' and x.admitted;
  if not found or h.cpu - h.cpu_allocated + v_cpu < j.cpu
     or h.memory - h.memory_allocated + v_memory < j.memory then
    return 0;
  end if;

  -- The budgets: each formation of a victim that has min_available, its row
  -- locked (in name order; one held elsewhere: refused) while its running
  -- jobs are counted.
  v_budgeted := array(select fm.name from pgfleet.formations fm
                       where fm.name in (select x.formation from pgfleet.jobs x where x.id = any(v_victims))
                         and fm.min_available is not null);
  if cardinality(v_budgeted) > 0 then
    select count(*) into v_locked
      from (select fm.name from pgfleet.formations fm where fm.name = any(v_budgeted)
             order by fm.name for update skip locked) l;
    if v_locked <> cardinality(v_budgeted) then
      return 0;
    end if;
    for f in select fm.name, fm.min_available from pgfleet.formations fm
              where fm.name = any(v_budgeted) loop
      select count(*), count(*) filter (where x.id = any(v_victims))
        into v_live, v_taken
        from pgfleet.jobs x
       where x.formation = f.name and x.state = 'running' and x.desired_state = 'run';
      if v_live - v_taken < f.min_available then
        return 0;
      end if;
    end loop;
  end if;

  with stopped as (
    update pgfleet.jobs x
       set desired_state = 'stop', preempted_by = p_job,
           -- a batch job comes back as a new attempt; a replica is replaced
           -- by its formation (it would count twice otherwise)
           requeue_on_stop = not exists (select 1 from pgfleet.formations fm
                                          where fm.name = x.formation and fm.kind in ('service', 'system'))
     where x.id = any(v_victims)
    returning x.id, x.attempt, x.priority
  ), events as (
    insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
    select s.id, s.attempt, 'stop_requested', p_host,
           format('preempted by job %s (priority %s) to make room on host %s', p_job, j.priority, p_host)
      from stopped s order by s.id
  )
  select count(*) into v_ok from stopped;
  update pgfleet.jobs x set preempting = v_victims,
         error = format('waiting for %s preempted jobs to stop on host %s (%s)', cardinality(v_victims),
                        p_host, array_to_string(v_victims, ', '))
   where x.id = p_job;
  insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
  values (p_job, j.attempt, 'preempting', p_host,
          format('stopping %s jobs of priority %s or lower on host %s to make room: %s',
                 cardinality(v_victims), v_max_priority, p_host, array_to_string(v_victims, ', ')));
  return v_ok;
end $$;
comment on function pgfleet.preempt(bigint, text, bigint[]) is
  'Schedulers only: stops p_victims on host p_host to make room for pending job p_job (desired_state stop, preempted_by p_job, an event naming it), after checking under row locks that each is still assigned or running there, wanted, preemptible and of strictly lower priority, that stopping them makes room, that no formation goes below its min_available, and that p_job waits for no earlier victims. A batch victim then comes back as a new attempt that does not count against max_attempts; a service or system replica ends cancelled and is replaced. All or none: returns how many were stopped (0: refused, nothing changed).';

-- A change of a formation's preemptible reaches the live jobs it made.
create or replace function pgfleet.formations_preemptible() returns trigger
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  update pgfleet.jobs j
     set preemptible = coalesce(new.preemptible, new.kind not in ('service', 'system'))
   where j.formation = new.name and j.owner = new.owner and j.version is not null
     and j.state in ('pending', 'assigned', 'running')
     and j.preemptible is distinct from coalesce(new.preemptible, new.kind not in ('service', 'system'));
  return null;
end $$;
comment on function pgfleet.formations_preemptible() is
  'AFTER UPDATE OF preemptible on formations: sets jobs.preemptible of the live jobs the formation made (its replicas) to the formation''s (null: false for service and system formations, true otherwise).';

drop trigger if exists formations_preemptible on pgfleet.formations;
create trigger formations_preemptible
  after update of preemptible on pgfleet.formations
  for each row when (old.preemptible is distinct from new.preemptible)
  execute function pgfleet.formations_preemptible();

-- The words of a preempted attempt's end (pgfleet.apply_reports: its event
-- and jobs.error).
create or replace function pgfleet.preempted_note(p_by bigint, p_state text, p_detail text)
returns text
language sql immutable as $$
  select 'preempted by job ' || p_by || ' (' || p_detail || '); '
         || case when p_state = 'pending'
                 then 'requeued as a new attempt (not counted against max_attempts)'
                 else 'its formation replaces it' end
$$;
comment on function pgfleet.preempted_note(bigint, text, text) is
  'How an attempt stopped for preemption by job p_by ended (p_detail: its exit in words), as it goes on to state p_state: requeued as a new attempt, or (a service or system replica) replaced by its formation.';
