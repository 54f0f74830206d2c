-- Reports from hosts: each attempt's running, exit, start failure or loss, applied
-- by report_jobs in three steps (running, exit, lost), each its own function.

create or replace function pgfleet.describe_exit(p_exit_code integer, p_signal integer,
                                                  p_oom boolean, p_error text)
returns text
language sql immutable as $$
  select case
    when p_error is not null and p_error <> '' then p_error
    when p_oom then 'out of memory'
    when p_signal is not null then 'killed by signal ' || p_signal::text
    else 'exit code ' || coalesce(p_exit_code::text, 'unknown')
  end
$$;
comment on function pgfleet.describe_exit(integer, integer, boolean, text) is 'An attempt''s outcome in words.';

-- Running step: an assigned attempt reported running becomes running.
-- Returns the job row as updated.
create or replace function pgfleet.report_running(j pgfleet.jobs, p_host text, p_pid integer)
returns pgfleet.jobs
language plpgsql as $$
begin
  -- host_id in every report update: it makes the host's live jobs the only
  -- index candidate (a generic plan once scanned every live job of the
  -- cluster through jobs_live_by_host_idx, 0.5 ms a report).
  update pgfleet.jobs x set state = 'running', started_at = now(), pid = p_pid
   where x.id = j.id and x.host_id = p_host and x.attempt = j.attempt and x.state = 'assigned'
  returning * into j;
  insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
  values (j.id, j.attempt, 'running', p_host, 'pid ' || coalesce(p_pid::text, 'unknown'));
  return j;
end $$;
comment on function pgfleet.report_running(pgfleet.jobs, text, integer) is
  'report_jobs'' running step: the locked, assigned attempt j becomes running with its pid, and a running event. Returns the updated row.';

-- The retry rule, in two parts, for an attempt of job j that ended (p_ok: it
-- succeeded; p_service: j is a service replica).
create or replace function pgfleet.failures_after_exit(j pgfleet.jobs, p_ok boolean, p_service boolean)
returns integer
language sql stable as $$
  -- A service replica that stayed up 10 minutes starts its backoff afresh; a
  -- stop (cancel, drain deadline) is not a failure.
  select case when p_service and j.started_at < now() - interval '10 minutes' then 0 else j.failures end
         + case when j.desired_state = 'stop' or (p_ok and not p_service) then 0 else 1 end
$$;
comment on function pgfleet.failures_after_exit(pgfleet.jobs, boolean, boolean) is
  'The retry rule: job j''s failures count once its current attempt ended, successfully or not (p_ok), as a service replica or not (p_service).';

create or replace function pgfleet.state_after_exit(j pgfleet.jobs, p_ok boolean, p_service boolean)
returns text
language sql stable as $$
  select case when j.desired_state = 'stop' and j.requeue_on_stop then 'pending'  -- moved off a draining host
              when j.desired_state = 'stop' then 'cancelled'
              when p_ok and not p_service then 'succeeded'
              when p_service or pgfleet.failures_after_exit(j, p_ok, p_service) < j.max_attempts then 'pending'
              else 'failed' end
$$;
comment on function pgfleet.state_after_exit(pgfleet.jobs, boolean, boolean) is
  'The retry rule: job j''s state once its current attempt ended: pending again (retry with backoff, service restart, or moved off a draining host), succeeded, failed (attempts used up) or cancelled.';

-- Exit step: an exited or start_failed report ends the attempt. An attempt
-- still assigned when its exit arrives (a short job: its running report came
-- in the same batch, or was lost) goes straight to its end in one update, and
-- its running and end events are one insert.
create or replace function pgfleet.report_exit(j pgfleet.jobs, p_host text, r jsonb) returns void
language plpgsql as $$
declare
  v_oom boolean := coalesce((r ->> 'oom_killed')::boolean, false);
  v_ok boolean := r ->> 'kind' = 'exited' and (r ->> 'exit_code')::integer = 0
                  and (r ->> 'signal') is null and not v_oom;
  v_ran boolean := r ->> 'kind' = 'exited';  -- start_failed: it never ran
  v_service boolean;
  v_state text;
  v_failures integer;
  v_detail text := pgfleet.describe_exit((r ->> 'exit_code')::integer, (r ->> 'signal')::integer,
                                         v_oom, r ->> 'error');
begin
  select f.kind = 'service' into v_service from pgfleet.formations f where f.name = j.formation;
  v_state := pgfleet.state_after_exit(j, v_ok, v_service);
  v_failures := pgfleet.failures_after_exit(j, v_ok, v_service);
  update pgfleet.jobs x
     set state = v_state,
         failures = v_failures,
         exit_code = (r ->> 'exit_code')::integer,
         signal = (r ->> 'signal')::integer,
         oom_killed = v_oom,
         peak_memory_bytes = (r ->> 'peak_memory_bytes')::bigint,
         cpu_seconds = (r ->> 'cpu_seconds')::double precision,
         output_tail = r ->> 'output_tail',
         error = case when v_ok then null else v_detail end,
         not_before = case when v_state = 'pending' and not j.requeue_on_stop
                           then now() + pgfleet.retry_backoff(v_failures) end,
         desired_state = case when j.requeue_on_stop then 'run' else x.desired_state end,
         requeue_on_stop = false,
         started_at = case when v_ran and x.started_at is null then now() else x.started_at end,
         pid = case when v_ran and x.state = 'assigned' then (r ->> 'pid')::integer else x.pid end,
         finished_at = case when v_state <> 'pending' then now() end
   where x.id = j.id and x.host_id = p_host and x.attempt = j.attempt
     and (x.state = 'running' or x.state = 'assigned' and r ->> 'kind' in ('exited', 'start_failed'));
  insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
  select j.id, j.attempt, e.kind, p_host, e.detail
    from (values
      (1, 'running', 'pid ' || coalesce(r ->> 'pid', 'unknown')),
      (2, case when v_state = 'pending' then 'requeued' else v_state end,
          case when v_state = 'pending' and j.requeue_on_stop
               then 'stopped on a draining host past its deadline; requeued'
               when v_state = 'pending'
               then v_detail || '; next attempt in ' || pgfleet.retry_backoff(v_failures)::text
                    || case when v_service then '' else ' (' || v_failures || ' of ' || j.max_attempts || ' failed)' end
               else v_detail end)) e(n, kind, detail)
   where e.n = 2 or j.state = 'assigned' and v_ran
   order by e.n;
end $$;
comment on function pgfleet.report_exit(pgfleet.jobs, text, jsonb) is
  'report_jobs'' exit step: the locked attempt j ended (report r: exited or start_failed); records its outcome, requeues it with backoff while attempts remain (pgfleet.state_after_exit), and writes the event.';

-- Lost step: the host lost track of the attempt (e.g. its process vanished
-- while hostd was down).
create or replace function pgfleet.report_lost(j pgfleet.jobs, p_host text, p_error text) returns void
language plpgsql as $$
declare
  v_state text := pgfleet.state_after_host_loss(j.desired_state, j.host_losses + 1);
begin
  update pgfleet.jobs x
     set state = v_state,
         host_losses = x.host_losses + 1,
         error = 'attempt ' || x.attempt || ' lost on host ' || p_host || ': ' || coalesce(p_error, 'unknown')
                 || pgfleet.host_loss_note(v_state),
         finished_at = case when v_state <> 'pending' then now() end
   where x.id = j.id and x.host_id = p_host and x.attempt = j.attempt and x.state in ('assigned', 'running');
  insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
  values (j.id, j.attempt, 'lost', p_host,
          coalesce(p_error, 'unknown') || pgfleet.host_loss_note(v_state));
end $$;
comment on function pgfleet.report_lost(pgfleet.jobs, text, text) is
  'report_jobs'' lost step: the locked attempt j was lost on its host; the job goes by the host-loss rule (pgfleet.state_after_host_loss), with a lost event.';

create or replace function pgfleet.report_jobs(p_host text, p_generation bigint, p_reports jsonb)
returns table (job_id bigint, attempt integer, kind text, accepted boolean)
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
-- p_reports, in the order they happened (the JSON of core/model/report.h):
--   {"job":1,"attempt":1,"kind":"running","pid":123}
--   {"job":1,"attempt":1,"kind":"exited","exit_code":0,"signal":null,"oom_killed":false,
--    "peak_memory_bytes":1,"cpu_seconds":0.1,"output_tail":"...","error":null}
--   {"job":1,"attempt":1,"kind":"start_failed","error":"exec \"foo\": No such file"}
--   {"job":1,"attempt":1,"kind":"lost","error":"..."}
-- Each report is applied only if the attempt is still the job's current one on this
-- host (fencing); accepted = false tells the host its attempt was superseded.
declare
  r jsonb;
  j pgfleet.jobs;
  v_current boolean;  -- p_generation is the host's current generation
  v_free_cpu integer := 0;
  v_free_memory integer := 0;
begin
  perform pgfleet.require_host(p_host);
  v_current := exists (select 1 from pgfleet.hosts h where h.id = p_host and h.generation = p_generation);
  for r in select * from jsonb_array_elements(p_reports) loop
    job_id := (r ->> 'job')::bigint;
    attempt := (r ->> 'attempt')::integer;
    kind := r ->> 'kind';
    select * into j from pgfleet.jobs x
     where x.id = job_id and x.attempt = report_jobs.attempt and x.host_id = p_host
       and x.state in ('assigned', 'running')
       for update;
    accepted := found and v_current;
    if accepted and j.state = 'assigned' and kind = 'running' then
      j := pgfleet.report_running(j, p_host, (r ->> 'pid')::integer);
    end if;
    if accepted and kind in ('exited', 'start_failed', 'lost') then
      if kind = 'lost' then
        perform pgfleet.report_lost(j, p_host, r ->> 'error');
      else
        perform pgfleet.report_exit(j, p_host, r);
      end if;
      v_free_cpu := v_free_cpu + j.cpu;
      v_free_memory := v_free_memory + j.memory;
    end if;
    return next;
  end loop;
  -- Resources go back to the host once, after every job row is locked: lock
  -- order is always jobs before hosts (as in the scheduler), so no deadlock.
  if v_free_cpu > 0 or v_free_memory > 0 then
    update pgfleet.hosts h
       set cpu_allocated = h.cpu_allocated - v_free_cpu, memory_allocated = h.memory_allocated - v_free_memory
     where h.id = p_host;
    perform pgfleet.wake_schedulers(array[pgfleet.all_formations()]);
  end if;
end $$;
comment on function pgfleet.report_jobs(text, bigint, jsonb) is
  'Applies a batch of reports from a host (running, exited, start_failed, lost), each guarded by job, attempt, host and state: the running, exit and lost steps. Frees resources on exit and requeues failed attempts with backoff while attempts remain.';
