-- Reports from hosts: each attempt's running, exit, start failure, loss or
-- health, applied by report_jobs a whole batch at a time.

-- report_jobs, below, applies a host's batch of reports in named steps:
-- refuse it all (an older generation of the host), or apply it, running
-- reports alone (apply_running_reports) or any other (apply_reports, which
-- reads the reports with read_reports); then tell waiters and schedulers.
-- Each step takes the whole batch, runs once per call, and runs only inside
-- report_jobs' call: as the schema's owner, under its settings (generic
-- plans, no sequential scans, its search_path), so execute on the steps is
-- revoked from public. A step is called as a PL/pgSQL expression (and
-- read_reports is inlined), so none costs a statement of its own: a batch
-- takes the statements it took when report_jobs was one function.
--
-- p_reports, in the order they happened (the JSON of core/model/report.h):
--   {"job":1,"attempt":1,"kind":"running","pid":123}
--   {"job":1,"attempt":1,"kind":"exited","exit_code":0,"signal":null,"oom_killed":false,
--    "peak_memory_bytes":1,"cpu_seconds":0.1,"output_tail":"...","error":null}
--   {"job":1,"attempt":1,"kind":"start_failed","error":"exec \"foo\": No such file"}
--   {"job":1,"attempt":1,"kind":"lost","error":"..."}
--   {"job":1,"attempt":1,"kind":"health","health":"unhealthy","output":"..."}
-- Any of them may carry "uid" (jobs.uid as the host knows the attempt): it
-- then applies only to the job of that uid.
-- Each report is applied only if the attempt is still the job's current one on this
-- host (fencing); accepted = false tells the host its attempt was superseded.
-- The steps that apply a batch answer, in their order, each report's job,
-- attempt, kind and whether it was accepted, whether the batch freed
-- resources on the host, and the jobs it changed.

-- A batch of running reports alone: attempts that started and have not ended
-- yet, as every job that runs longer than a report's round trip is reported
-- (its end comes in a later call). One statement, without apply_reports'
-- lock, windows and host update (docs/decisions/0012), with
-- the same outcome (tests/integration/report_jobs_test.cpp). The update
-- checks each attempt on the row as it is when written (a row changed
-- meanwhile is checked again), so nothing needs locking first; rows are taken
-- in id order (the reports sorted by job), as apply_reports takes them.
-- Accepted: started now, or already running here (a report sent again).
create or replace function pgfleet.apply_running_reports(
  p_host text, p_reports jsonb,
  out job_ids bigint[], out attempts integer[], out kinds text[], out accepted boolean[],
  out freed_resources boolean, out changed_jobs bigint[])
language plpgsql as $$
#variable_conflict use_column
begin
  with r as (
    select t.n, (t.e ->> 'job')::bigint as job, (t.e ->> 'attempt')::integer as att,
           (t.e ->> 'pid')::integer as pid, t.e ->> 'uid' as uid, t.e ->> 'address' as address
      from jsonb_array_elements(p_reports) with ordinality t(e, n)
  ),
  first_run as (  -- an attempt's first running report is the one that counts
    select distinct on (r.job, r.att) r.* from r order by r.job, r.att, r.n
  ),
  started as (
    update pgfleet.jobs j
       set state = 'running', started_at = coalesce(j.started_at, now()), pid = f.pid,
           address = pgfleet.reported_address(f.address)
      from first_run f
     -- by primary key, in its order (the host's live jobs, a join's
     -- other choice, are thousands)
     where j.id = any (array(select f2.job from first_run f2))
       and j.id = f.job and j.attempt = f.att and j.host_id = p_host and j.state = 'assigned'
       and pgfleet.report_names_job(f.uid, j.uid)
    returning j.id, j.attempt, j.pid
  ),
  events as (
    insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
    select s.id, s.attempt, 'running', p_host, 'pid ' || coalesce(s.pid::text, 'unknown')
      from started s order by s.id
  )
  select array_agg(r.job order by r.n), array_agg(r.att order by r.n),
         array_agg(s.id is not null or coalesce(c.running, false) order by r.n),
         (select array_agg(s2.id) from started s2)
    into job_ids, attempts, accepted, changed_jobs
    from r
    left join started s on s.id = r.job and s.attempt = r.att
    left join lateral (
      select j.attempt = r.att and j.host_id = p_host and j.state = 'running'
             and pgfleet.report_names_job(r.uid, j.uid) as running
        from pgfleet.jobs j where j.id = r.job offset 0) c
      on true;
  kinds := array_fill('running'::text, array[cardinality(job_ids)]);
  freed_resources := false;
end $$;
comment on function pgfleet.apply_running_reports(text, jsonb) is
  'Step of pgfleet.report_jobs: applies a batch of running reports alone from host p_host in one statement (assigned attempts become running, with their events); answers each report''s job, attempt, kind and acceptance in order, and the jobs changed.';
revoke execute on function pgfleet.apply_running_reports(text, jsonb) from public;

-- Each report of the batch, numbered in its order (n), with its job as it is
-- (old; its state s0), whether the report may apply to it (live: the attempt
-- is still the job's current one on host p_host, assigned or running, and
-- the uid the report names, if any, is the job's), the number of its
-- attempt's first ending report that applies (end_n: exited, start_failed or
-- lost) and of its first running report before that (run_n). Every job is
-- found by its primary key (a LATERAL lookup the planner cannot turn into a
-- scan of the host's live jobs, or into a nested loop over the reports: both
-- were quadratic in the batch, 36 ms for 200 jobs). A SQL function the
-- planner inlines into apply_reports' statement: it is no statement of its own.
create or replace function pgfleet.read_reports(p_host text, p_reports jsonb)
returns table (n bigint, job bigint, att integer, kind text, e jsonb, old pgfleet.jobs,
               s0 text, live boolean, end_n bigint, run_n bigint)
language sql stable as $$
  with r as (  -- the reports, numbered in their order
    select t.n, (t.e ->> 'job')::bigint as job, (t.e ->> 'attempt')::integer as att,
           t.e ->> 'kind' as kind, t.e
      from jsonb_array_elements(p_reports) with ordinality t(e, n)
  ),
  rl as (  -- each with the job as it is, and whether the report may apply to it
    select r.*, c.old, c.state as s0,
           coalesce(c.attempt = r.att and c.host_id = p_host and c.state in ('assigned', 'running')
                    and pgfleet.report_names_job(r.e ->> 'uid', c.uid),
                    false) as live
      from r
      left join lateral (
        select j as old, j.attempt, j.host_id, j.state, j.uid
          from pgfleet.jobs j where j.id = r.job offset 0) c
        on true
  ),
  r_end as (  -- with the number of their attempt's first ending report that applies
    select rl.*, min(rl.n) filter (where rl.live and rl.kind in ('exited', 'start_failed', 'lost'))
                   over (partition by rl.job, rl.att) as end_n
      from rl
  )
  -- and of its first running report before that
  select r_end.*,
         min(r_end.n) filter (where r_end.live and r_end.kind = 'running'
                                and (r_end.end_n is null or r_end.n < r_end.end_n))
           over (partition by r_end.job, r_end.att) as run_n
    from r_end
$$;
comment on function pgfleet.read_reports(text, jsonb) is
  'Step of pgfleet.report_jobs (inlined into pgfleet.apply_reports): each report of p_reports in order, with its job as it is, whether it may apply (live: the job''s current attempt on host p_host, uid matching), and the numbers of its attempt''s first applicable ending report (end_n) and first running report before it (run_n).';
revoke execute on function pgfleet.read_reports(text, jsonb) from public;

-- Any batch but running reports alone, in two statements whatever its size
-- (docs/decisions/0003): the first locks the attempts, the second
-- decides each attempt's outcome from its reports and writes it, with one
-- UPDATE of jobs, one INSERT of events and one UPDATE of the host. Per
-- attempt, what counts is its first ending report (exited, start_failed or
-- lost) and its first running report before that (read_reports); a report
-- that comes after its attempt's end in the batch is refused, as it would be
-- in a later batch. An attempt still assigned whose running report and exit
-- arrive together (or whose running report was lost) goes straight to its
-- end, with a running event and its end event. Ended attempts' resources go
-- back to the host (freed_resources).
create or replace function pgfleet.apply_reports(
  p_host text, p_reports jsonb,
  out job_ids bigint[], out attempts integer[], out kinds text[], out accepted boolean[],
  out freed_resources boolean, out changed_jobs bigint[])
language plpgsql as $$
#variable_conflict use_column
begin
  -- Lock the attempts first, in id order: the second statement then sees them
  -- as they are, and nothing changes them under it. Lock order is always jobs
  -- before hosts (a scheduler's pass, which takes hosts first, never waits
  -- for a row: skip locked), so no deadlock. Every job is found by its
  -- primary key, as in read_reports.
  perform 1
     from (select distinct (e ->> 'job')::bigint as job from jsonb_array_elements(p_reports) e) r
     cross join lateral (
       select j.id, j.host_id, j.state from pgfleet.jobs j where j.id = r.job offset 0) j
    where j.host_id = p_host and j.state in ('assigned', 'running')
    order by j.id
      for update of j;
  with rx as (
    select * from pgfleet.read_reports(p_host, p_reports)
  ),
  x as (  -- per live attempt: its ending report, the pid of its running report
    select rx.job as id, rx.att as attempt, (array_agg(rx.old))[1] as old, min(rx.s0) as s0,
           min(rx.end_n) as end_n, min(rx.run_n) as run_n,
           (array_agg(rx.e) filter (where rx.n = rx.end_n))[1] as rep,
           (array_agg((rx.e ->> 'pid')::integer) filter (where rx.n = rx.run_n))[1] as run_pid,
           (array_agg(rx.e ->> 'address') filter (where rx.n = rx.run_n))[1] as run_address
      from rx where rx.live
     group by rx.job, rx.att
  ),
  o as (  -- what each attempt's reports say
    select x.*, coalesce(f.kind in ('service', 'system'), false) as service,
           x.rep ->> 'kind' in ('exited', 'start_failed') as exits, x.rep ->> 'kind' = 'lost' as lost,
           x.run_n is not null or x.rep ->> 'kind' = 'exited' as ran,
           coalesce(x.run_pid, (x.rep ->> 'pid')::integer) as pid,
           -- The exit code decides (an OOM-killed child the job handled does not).
           x.rep ->> 'kind' = 'exited' and (x.rep ->> 'exit_code')::integer = 0
             and (x.rep ->> 'signal') is null as ok,
           pgfleet.describe_exit((x.rep ->> 'exit_code')::integer, (x.rep ->> 'signal')::integer,
                                 coalesce((x.rep ->> 'oom_killed')::boolean, false),
                                 x.rep ->> 'error') as detail
      from x left join pgfleet.formations f on f.name = (x.old).formation
  ),
  s as (  -- and what becomes of it: the retry rule, the host-loss rule
    select o.*,
           case when o.exits then pgfleet.state_after_exit(o.old, o.ok, o.service)
                when o.lost then pgfleet.state_after_host_loss((o.old).desired_state, (o.old).host_losses + 1)
                else 'running' end as state,
           case when o.exits then pgfleet.failures_after_exit(o.old, o.ok, o.service)
                else (o.old).failures end as failures
      from o
     where o.end_n is not null or o.ran and o.s0 = 'assigned'
  ),
  written as (
    update pgfleet.jobs j
       set state = s.state,
           failures = s.failures,
           host_losses = j.host_losses + case when s.lost then 1 else 0 end,
           exit_code = case when s.exits then (s.rep ->> 'exit_code')::integer else j.exit_code end,
           signal = case when s.exits then (s.rep ->> 'signal')::integer else j.signal end,
           oom_killed = case when s.exits then coalesce((s.rep ->> 'oom_killed')::boolean, false)
                             else j.oom_killed end,
           peak_memory_bytes = case when s.exits then (s.rep ->> 'peak_memory_bytes')::bigint
                                    else j.peak_memory_bytes end,
           cpu_seconds = case when s.exits then (s.rep ->> 'cpu_seconds')::double precision
                              else j.cpu_seconds end,
           output_tail = case when s.exits then s.rep ->> 'output_tail' else j.output_tail end,
           error = case when s.exits and (s.old).preempted_by is not null
                        then pgfleet.preempted_note((s.old).preempted_by, s.state, s.detail)
                        when s.exits then case when s.ok then null else s.detail end
                        when s.lost then 'attempt ' || j.attempt || ' lost on host ' || p_host || ': '
                                         || coalesce(s.rep ->> 'error', 'unknown')
                                         || pgfleet.host_loss_note(s.state)
                        else j.error end,
           not_before = case when not s.exits then j.not_before
                             when s.state = 'pending' and not j.requeue_on_stop
                             then now() + pgfleet.retry_backoff(s.failures) end,
           desired_state = case when s.exits and j.requeue_on_stop then 'run' else j.desired_state end,
           requeue_on_stop = case when s.exits then false else j.requeue_on_stop end,
           preempted_by = case when s.end_n is null then j.preempted_by end,
           started_at = case when s.ran and j.started_at is null then now() else j.started_at end,
           pid = case when s.ran and j.state = 'assigned' then s.pid else j.pid end,
           address = case when s.ran and j.state = 'assigned' then pgfleet.reported_address(s.run_address)
                          else j.address end,
           finished_at = case when s.end_n is null then j.finished_at
                              when s.state <> 'pending' then now() end
      from s
     where j.id = s.id  -- locked above, and checked live (rx.live)
  ),
  events as (
    insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
    select s.id, s.attempt, v.kind, p_host, v.detail
      from s cross join lateral (values
        (1, case when s.s0 = 'assigned' and s.ran then 'running' end,
            'pid ' || coalesce(s.pid::text, 'unknown')),
        (2, case when s.lost then 'lost'
                 when s.exits and s.state = 'pending' then 'requeued'
                 when s.exits then s.state end,
            case when s.lost then coalesce(s.rep ->> 'error', 'unknown') || pgfleet.host_loss_note(s.state)
                 when (s.old).preempted_by is not null
                 then pgfleet.preempted_note((s.old).preempted_by, s.state, s.detail)
                 when s.state = 'pending' and (s.old).requeue_on_stop
                 then 'stopped on a draining host past its deadline; requeued'
                 when s.state = 'pending'
                 then s.detail || '; next attempt in ' || pgfleet.retry_backoff(s.failures)::text
                      || case when s.service then ''
                              else ' (' || s.failures || ' of ' || (s.old).max_attempts || ' failed)' end
                 else s.detail end)) v(k, kind, detail)
     where v.kind is not null
     order by s.id, v.k
  ),
  freed as (  -- resources of the ended attempts go back to the host, once
    update pgfleet.hosts h
       set cpu_allocated = h.cpu_allocated - f.cpu, memory_allocated = h.memory_allocated - f.memory
      from (select sum((s.old).cpu) as cpu, sum((s.old).memory) as memory
              from s where s.end_n is not null) f
     where h.id = p_host and f.cpu is not null
    returning 1
  )
  select array_agg(rx.job order by rx.n), array_agg(rx.att order by rx.n), array_agg(rx.kind order by rx.n),
         array_agg(rx.live and (rx.end_n is null or rx.n <= rx.end_n) order by rx.n),
         exists (select 1 from freed), (select array_agg(s.id) from s)
    into job_ids, attempts, kinds, accepted, freed_resources, changed_jobs
    from rx;
end $$;
comment on function pgfleet.apply_reports(text, jsonb) is
  'Step of pgfleet.report_jobs: applies any batch of reports from host p_host but running reports alone, in two statements (lock the attempts; one update of the jobs, one insert of events, one update of the host); answers each report''s job, attempt, kind and acceptance in order, whether resources were freed, and the jobs changed.';
revoke execute on function pgfleet.apply_reports(text, jsonb) from public;

-- p_wake: whether this call wakes sleeping schedulers when it frees resources.
-- hostd passes false (docs/decisions/0004). The call then says
-- in wake_schedulers (the same on every row) whether the caller must call
-- pgfleet.wake_schedulers once the batch has committed: only when it freed
-- resources while a scheduler sleeps. When none sleeps, the idle lock it took
-- shared (pgfleet.schedulers_sleep) keeps any from falling asleep before this
-- commits without looking at the freed room first, so no wake is needed, and
-- a busy control plane spends no statement on one.
create or replace function pgfleet.report_jobs(p_host text, p_generation bigint, p_reports jsonb,
                                               p_wake boolean default true)
returns table (job_id bigint, attempt integer, kind text, accepted boolean, wake_schedulers boolean)
language plpgsql security definer set search_path = pgfleet, pg_temp
-- Generic plans: every statement of the steps reaches jobs by primary key
-- whatever the batch, and planning the batch statement anew (a custom plan)
-- took 2.2 ms a call, longer than running it. No sequential scans: with a few
-- thousand jobs in the table, the generic plan's guess of 50 reports made a
-- hash join over all of jobs look cheaper than 50 primary-key lookups (2 ms
-- a call, growing with the table until the estimate flips).
set plan_cache_mode = force_generic_plan set enable_seqscan = off as $$
#variable_conflict use_column
declare
  v record;  -- what the step that applied the batch answers
  hr record;  -- what apply_health_reports answers (when v_health)
  v_health boolean := jsonb_path_exists(p_reports, '$[*] ? (@.kind == "health")');
  v_rest jsonb := p_reports;  -- the reports but health
  v_wake boolean := false;
begin
  perform pgfleet.require_host(p_host);
  if not exists (select 1 from pgfleet.hosts h where h.id = p_host and h.generation = p_generation) then
    -- An older generation of the host: nothing it says applies.
    return query select (e ->> 'job')::bigint, (e ->> 'attempt')::integer, e ->> 'kind', false, false
                   from jsonb_array_elements(p_reports) with ordinality t(e, n) order by n;
    return;
  end if;
  -- Health reports first (jobs only, no host row), then the rest.
  if v_health then
    hr := pgfleet.apply_health_reports(
      p_host, jsonb_path_query_array(p_reports, '$[*] ? (@.kind == "health")'));
    v_rest := jsonb_path_query_array(p_reports, '$[*] ? (@.kind != "health")');
  end if;
  if jsonb_array_length(v_rest) = 0 then
    select array[]::bigint[] as job_ids, array[]::integer[] as attempts, array[]::text[] as kinds,
           array[]::boolean[] as accepted, false as freed_resources, array[]::bigint[] as changed_jobs
      into v;
  elsif jsonb_array_length(jsonb_path_query_array(v_rest, '$[*] ? (@.kind == "running")'))
     = jsonb_array_length(v_rest) then
    v := pgfleet.apply_running_reports(p_host, v_rest);
  else
    v := pgfleet.apply_reports(p_host, v_rest);
  end if;
  if v_health then
    v.changed_jobs := coalesce(hr.changed_jobs, '{}') || coalesce(v.changed_jobs, '{}');
  end if;
  -- Jobs after those that ended are released or fail (024_dependencies.sql):
  -- the table is empty unless some job waits for another, and then one index
  -- probe for the batch (a report is never of a waiting job).
  if exists (select 1 from pgfleet.job_dependencies)
     and exists (select 1 from pgfleet.job_dependencies d where d.needs = any(v.changed_jobs)) then
    perform pgfleet.settle_dependents(v.changed_jobs);
  end if;
  -- Only jobs someone waits for; nobody waits most of the time, and asking
  -- costs less than the call (docs/benchmarks/2026-11-25-fewer-statements-per-job.md).
  if exists (select 1 from pgfleet.job_waiters) then
    perform pgfleet.notify_waiters(v.changed_jobs);
  end if;
  if v.freed_resources and p_wake then
    perform pgfleet.wake_schedulers(array[pgfleet.all_formations()]);
  elsif v.freed_resources then
    v_wake := pgfleet.schedulers_sleep();
  end if;
  if v_health then
    return query select u.*, v_wake from unnest(hr.job_ids, hr.attempts, hr.kinds, hr.accepted) u;
  end if;
  return query select u.*, v_wake from unnest(v.job_ids, v.attempts, v.kinds, v.accepted) u;
end $$;
comment on function pgfleet.report_jobs(text, bigint, jsonb, boolean) is
  'Applies a batch of reports from a host (running, exited, start_failed, lost, health), each guarded by job, attempt, host and state, set-based: one update of the jobs, one insert of events, one update of the host. Frees resources on exit and requeues failed attempts with backoff while attempts remain (pgfleet.state_after_exit; lost: pgfleet.state_after_host_loss). With p_wake (the default), wakes sleeping schedulers when resources were freed; without it (hostd), wake_schedulers says on every row whether resources were freed while a scheduler sleeps, and the caller then calls pgfleet.wake_schedulers after the commit.';

-- hostd's call: report_jobs without its own wake (hostd wakes the schedulers
-- after the commit, WakeSchedulers, so its report commits hold no NOTIFY
-- lock), and for an accepted running report of a first attempt the seconds
-- from the job's insert to now on the database's clock, -1 otherwise
-- (pgfleet_host_insert_to_running_seconds; one primary-key probe each). A
-- host reads no table itself: this reads the created_at of its own jobs only
-- (report_jobs accepts only the calling host's attempts).
create or replace function pgfleet.report_jobs_timed(p_host text, p_generation bigint,
                                                     p_reports jsonb)
returns table (job_id bigint, attempt integer, kind text, accepted boolean,
               wake_schedulers boolean, since_insert double precision)
language sql security definer set search_path = pgfleet, pg_temp as $$
  select r.job_id, r.attempt, r.kind, r.accepted, r.wake_schedulers,
         case when r.kind = 'running' and r.accepted and r.attempt = 1
              then coalesce((select extract(epoch from now() - j.created_at)::float8
                               from pgfleet.jobs j where j.id = r.job_id), -1)
              else -1 end
    from pgfleet.report_jobs(p_host, p_generation, p_reports, false) r
$$;
comment on function pgfleet.report_jobs_timed(text, bigint, jsonb) is
  'hostd''s report call: pgfleet.report_jobs(p_host, p_generation, p_reports, false), one row per report in order, with since_insert: for an accepted running report of a first attempt, seconds from the job''s insert to now (the database''s clock), else -1.';
