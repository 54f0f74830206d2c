-- Dependencies by plain INSERT (jobs.after; docs/dependencies.md): the rules
-- a job's list must meet, how a job waits (pending, not_before = infinity,
-- its edges in pgfleet.job_dependencies), and how it is released or failed
-- when the jobs it needs end. Re-created on every `pgfleet migrate`.
--
-- What must hold:
--   - No cycle: a job names only jobs that exist, that its submitter can
--     see, and whose ids are smaller than its own, so every edge points from
--     a larger id to a smaller one.
--   - A job without after costs nothing: the insert trigger below runs only
--     for rows that have one (its WHEN), and a waiting job is in no index the
--     scheduler reads (not_before = infinity is beyond every due range of
--     jobs_retry_at_idx). The exit paths (report_jobs, stop_jobs, the
--     lost-host sweep, deletes) call settle_dependents only while
--     job_dependencies has a row, which it has only while some job waits.
--   - A waiting job is released (placeable) once every job it needs has
--     succeeded, and fails, naming the first that did not, once one has
--     failed, been cancelled or been deleted; its own dependents then fail
--     too, in the same transaction.
--   - Nothing waits on a user's transaction: a waiting job another
--     transaction holds is skipped, and the schedulers' sweep
--     (pgfleet.settle_all_dependents, every tick) settles it, and any job a
--     race left waiting, within a tick.

-- Why a waiting job waits, for its error column: 'waiting for job 12' or
-- 'waiting for jobs 12, 13' (the jobs it needs that have not succeeded yet).
create or replace function pgfleet.waiting_reason(p_needs bigint[]) returns text
language sql immutable as $$
  select 'waiting for job' || case when cardinality(p_needs) > 1 then 's ' else ' ' end
         || array_to_string(p_needs, ', ')
$$;
comment on function pgfleet.waiting_reason(bigint[]) is
  'The error of a job that waits for the jobs p_needs: ''waiting for job 12'' or ''waiting for jobs 12, 13''.';

-- Why a job fails because of the job it needed: 'dependency job 12 failed:
-- exit code 1', '... was cancelled: ...', '... was deleted' (bounded: a
-- chain repeats its causes).
create or replace function pgfleet.dependency_failure(p_job bigint, p_state text, p_error text)
returns text
language sql immutable as $$
  select left('dependency job ' || p_job || ' '
              || case when p_state is null then 'was deleted'
                      when p_state = 'cancelled' then 'was cancelled'
                      else p_state end
              || coalesce(': ' || nullif(p_error, ''), ''), 1000)
$$;
comment on function pgfleet.dependency_failure(bigint, text, text) is
  'The error of a job that fails because job p_job it needed ended in state p_state (null: deleted) with error p_error: ''dependency job 12 failed: exit code 1''.';

-- BEFORE INSERT of a row with after (the trigger's WHEN): the rules that
-- need other rows, then the row waits or is placeable at once. Refused:
-- a job listed twice, the job itself, a job that does not exist or that
-- the caller cannot see (one message for both: nobody learns whether
-- another owner's job exists), a job with a larger id (inserted later), a
-- job already failed or cancelled (the new one could never run). Rows
-- earlier in the same statement are visible here, so a DAG may be one
-- multi-row INSERT as well as one transaction. The job's error is always
-- this trigger's (the insert rules let a row with after carry one only for
-- that reason: pgfleet.owned_column_set).
create or replace function pgfleet.jobs_link_dependencies() returns trigger
language plpgsql security definer set search_path = pgfleet, pg_temp
-- Every job it names by primary key, whatever the statistics say (as in
-- report_jobs): one statement reads them all.
set enable_seqscan = off as $$
declare
  v_caller text := pgfleet.caller();
  v record;
begin
  new.error := null;
  if cardinality(new.after) = 0 then
    new.after := null;
    return new;
  end if;
  if new.id = any(new.after) then
    raise exception 'after must not name the job itself (job %)', new.id
      using errcode = 'check_violation', column = 'after';
  end if;
  -- Each rule's first breaker (in id order), from one read of the jobs named.
  select (array_agg(x.id order by x.id) filter (where x.n > 1))[1] as twice,
         (array_agg(x.id order by x.id) filter (where not x.visible))[1] as hidden,
         (array_agg(x.id order by x.id) filter (where x.visible and x.id > new.id))[1] as later,
         (array_agg(x.id order by x.id) filter (where x.visible and x.state in ('failed', 'cancelled')))[1]
           as ended,
         (array_agg(x.state order by x.id) filter (where x.visible and x.state in ('failed', 'cancelled')))[1]
           as ended_state,
         coalesce(array_agg(x.id order by x.id) filter (where x.visible and x.state <> 'succeeded'), '{}')
           as waiting
    into v
    from (select a.id, count(*) as n, coalesce(bool_or(j.visible), false) as visible, min(j.state) as state
            from unnest(new.after) a(id)
            left join lateral (
              select j.state, j.owner = v_caller or pgfleet.sees_every_job() as visible
                from pgfleet.jobs j where j.id = a.id offset 0) j on true
           group by a.id) x;
  if v.twice is not null then
    raise exception 'after lists job % twice', v.twice
      using errcode = 'check_violation', column = 'after', detail = format('job %s', new.id);
  end if;
  if v.hidden is not null then
    raise exception 'after names job %, which does not exist or which % cannot see (a job may only name existing jobs of its submitter)',
      v.hidden, v_caller
      using errcode = 'foreign_key_violation', column = 'after', detail = format('job %s', new.id);
  end if;
  if v.later is not null then
    raise exception 'after names job %, inserted after job %: a job may only name jobs inserted before it (so no cycle can be made)',
      v.later, new.id
      using errcode = 'check_violation', column = 'after';
  end if;
  if v.ended is not null then
    raise exception 'after names job %, which already %: a job after it could never run', v.ended,
      case when v.ended_state = 'failed' then 'failed' else 'was cancelled' end
      using errcode = 'check_violation', column = 'after', detail = format('job %s', new.id);
  end if;
  if cardinality(v.waiting) = 0 then
    return new;  -- all succeeded already: placeable now
  end if;
  insert into pgfleet.job_dependencies (needs, job_id, not_before)
  select x, new.id, new.not_before from unnest(v.waiting) x;
  new.not_before := 'infinity';
  new.error := pgfleet.waiting_reason(v.waiting);
  return new;
end $$;
comment on function pgfleet.jobs_link_dependencies() is
  'BEFORE INSERT on jobs, for rows with after: refuses a list naming a job twice, the job itself, a job that does not exist or the caller cannot see (one message), a later job, or a job already failed or cancelled; otherwise the job is placeable at once (all succeeded) or waits (not_before infinity, error ''waiting for job N'', its edges in pgfleet.job_dependencies).';
revoke execute on function pgfleet.jobs_link_dependencies() from public;

drop trigger if exists jobs_link_dependencies on pgfleet.jobs;
create trigger jobs_link_dependencies
  before insert on pgfleet.jobs
  for each row when (new.after is not null)
  execute function pgfleet.jobs_link_dependencies();

-- after is set at insert only: the edges were checked against the jobs as
-- they were then (submitters and operators may not update jobs at all; this
-- holds for the roles that may).
create or replace function pgfleet.jobs_refuse_after_update() returns trigger
language plpgsql as $$
begin
  raise exception 'after is set at insert only (job %): submit a new job instead', old.id
    using errcode = 'check_violation', column = 'after';
end $$;
comment on function pgfleet.jobs_refuse_after_update() is
  'BEFORE UPDATE OF after on jobs, when it changes: refuses (the dependencies of a job are fixed at insert).';

drop trigger if exists jobs_refuse_after_update on pgfleet.jobs;
create trigger jobs_refuse_after_update
  before update of after on pgfleet.jobs
  for each row when (old.after is distinct from new.after)
  execute function pgfleet.jobs_refuse_after_update();

-- The waiting jobs that have an edge to one of p_ended (null: every waiting
-- job) are settled: released when every job they need succeeded, failed
-- naming the first that failed, was cancelled or was deleted, or left
-- waiting with their reason brought up to date. A job failed here ends its
-- own dependents too, in the same call (a loop over the DAG's depth). A
-- waiting job another transaction holds is skipped (the sweep settles it).
-- Released jobs wake sleeping schedulers; watched jobs notify their
-- waiters. Returns how many jobs were released or failed.
create or replace function pgfleet.settle_dependents(p_ended bigint[]) returns integer
language plpgsql security definer set search_path = pgfleet, pg_temp
-- Edges and jobs by index (as settle_dependents_of).
set enable_seqscan = off as $$
declare
  v_ended bigint[] := p_ended;
  v_waiting bigint[];
  v_failed bigint[];
  v_released bigint[];
  v_changed bigint[] := '{}';
  v_count integer := 0;
begin
  loop
    -- The waiting jobs concerned, locked in id order: those after one of
    -- v_ended, or (the sweep) after a job that ended or is gone; and jobs of
    -- v_ended, or (the sweep) any, that no longer wait (cancelled): their
    -- edges go.
    v_waiting := array(
      select j.id from pgfleet.jobs j
       where j.id in (select d.job_id from pgfleet.job_dependencies d where d.needs = any(v_ended)
                      union
                      select d.job_id from pgfleet.job_dependencies d where d.job_id = any(v_ended)
                      union
                      select d.job_id from pgfleet.job_dependencies d
                       where v_ended is null
                         and (not exists (select 1 from pgfleet.jobs n
                                           where n.id = d.needs
                                             and n.state in ('pending', 'assigned', 'running'))
                              or not exists (select 1 from pgfleet.jobs x
                                              where x.id = d.job_id and x.state = 'pending')))
       order by j.id
         for update of j skip locked);
    -- Edges of waiting jobs that were deleted (jobs_after_delete passes their ids).
    delete from pgfleet.job_dependencies d
     where d.job_id = any(v_ended) and not exists (select 1 from pgfleet.jobs j where j.id = d.job_id);
    exit when cardinality(v_waiting) = 0;
    -- Each job's verdict from its edges, read once the jobs are locked, in a
    -- statement of its own (a snapshot that sees what committed before the
    -- lock was taken).
    with e as (
      select d.job_id, d.needs, d.not_before, n.state, n.error
        from pgfleet.job_dependencies d
        left join pgfleet.jobs n on n.id = d.needs
       where d.job_id = any(v_waiting)
    ), v as (
      select e.job_id,
             (array_agg(e.needs order by e.needs)
                filter (where e.state is null or e.state in ('failed', 'cancelled')))[1] as broken,
             bool_and(e.state is not distinct from 'succeeded') as ready,
             array_agg(e.needs order by e.needs)
               filter (where e.state is distinct from 'succeeded') as unmet,
             max(e.not_before) as not_before
        from e group by e.job_id
    ), w as (
      select v.*, j.state as job_state, j.error as job_error,
             pgfleet.dependency_failure(v.broken, b.state, b.error) as failure
        from v join pgfleet.jobs j on j.id = v.job_id
        left join pgfleet.jobs b on b.id = v.broken
    ), failed as (
      update pgfleet.jobs j
         set state = 'failed', finished_at = now(), error = w.failure, not_before = null
        from w
       where j.id = w.job_id and w.job_state = 'pending' and w.broken is not null
      returning j.id, j.attempt, j.error
    ), failed_events as (
      insert into pgfleet.job_events (job_id, attempt, kind, detail)
      select f.id, f.attempt, 'failed', f.error from failed f
    ), released as (
      update pgfleet.jobs j
         set not_before = w.not_before, error = null
        from w
       where j.id = w.job_id and w.job_state = 'pending' and w.broken is null and w.ready
      returning j.id, j.attempt, j.formation
    ), released_events as (
      insert into pgfleet.job_events (job_id, attempt, kind, detail)
      select r.id, r.attempt, 'released', 'the jobs it was after succeeded' from released r
    ), still as (
      update pgfleet.jobs j
         set error = pgfleet.waiting_reason(w.unmet)
        from w
       where j.id = w.job_id and w.job_state = 'pending' and w.broken is null and not w.ready
         and j.error is distinct from pgfleet.waiting_reason(w.unmet)
    ), gone as (
      delete from pgfleet.job_dependencies d using w
       where d.job_id = w.job_id and (w.job_state <> 'pending' or w.broken is not null or w.ready)
    )
    select array(select f.id from failed f), array(select r.id from released r)
      into v_failed, v_released;
    if cardinality(v_released) > 0 then
      perform pgfleet.wake_schedulers(array(
        select f.id::text from pgfleet.formations f
         where f.name in (select j.formation from pgfleet.jobs j where j.id = any(v_released))));
    end if;
    v_count := v_count + cardinality(v_failed) + cardinality(v_released);
    v_changed := v_changed || v_failed || v_released;
    exit when cardinality(v_failed) = 0;
    v_ended := v_failed;  -- their dependents fail in turn
  end loop;
  if cardinality(v_changed) > 0 and exists (select 1 from pgfleet.job_waiters) then
    perform pgfleet.notify_waiters(v_changed);
  end if;
  return v_count;
end $$;
comment on function pgfleet.settle_dependents(bigint[]) is
  'Settles the jobs waiting for one of the jobs p_ended (null: every waiting job): released (placeable, not_before as submitted) once all they need succeeded, failed naming the first that failed, was cancelled or deleted (their dependents in turn), else their reason updated. Skips a waiting job another transaction holds. Wakes schedulers for released jobs, notifies waiters. Returns how many jobs were released or failed.';
revoke execute on function pgfleet.settle_dependents(bigint[]) from public;

-- The exit paths' call (stop_jobs, the lost-host sweep, deletes; report_jobs
-- probes the jobs needed itself, as its reports are never of a waiting job):
-- two index probes, nothing more unless one of p_ended is needed or waits.
create or replace function pgfleet.settle_dependents_of(p_ended bigint[]) returns void
language plpgsql security definer set search_path = pgfleet, pg_temp
-- Index probes whatever the statistics say (a few jobs needed by many made
-- the planner scan the table: 60 ms for a batch of 200 instead of 0.5 ms).
set enable_seqscan = off as $$
begin
  if p_ended is not null and cardinality(p_ended) > 0
     and (exists (select 1 from pgfleet.job_dependencies d where d.needs = any(p_ended))
          or exists (select 1 from pgfleet.job_dependencies d where d.job_id = any(p_ended))) then
    perform pgfleet.settle_dependents(p_ended);
  end if;
end $$;
comment on function pgfleet.settle_dependents_of(bigint[]) is
  'Settles the jobs waiting for any of p_ended, and the jobs of p_ended that waited (pgfleet.settle_dependents), if there are any: two index probes of pgfleet.job_dependencies otherwise.';
revoke execute on function pgfleet.settle_dependents_of(bigint[]) from public;

-- The schedulers' sweep, every tick: settles every waiting job whose jobs
-- ended without settling it (a dependency that ended while the job's
-- insert was uncommitted, a waiting job another transaction held, a state
-- written by hand). One probe of an empty table when nothing waits.
create or replace function pgfleet.settle_all_dependents() returns integer
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  if not exists (select 1 from pgfleet.job_dependencies) then
    return 0;
  end if;
  return pgfleet.settle_dependents(null);
end $$;
comment on function pgfleet.settle_all_dependents() is
  'The schedulers'' sweep: settles every waiting job (pgfleet.settle_dependents(null)) when any waits; returns how many were released or failed.';
revoke execute on function pgfleet.settle_all_dependents() from public;
grant execute on function pgfleet.settle_all_dependents() to pgfleet_scheduler;
