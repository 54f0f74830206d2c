-- What an attempt's exit means for its job: the words for it, whether a
-- report names this job, and the job's failures and state after it (read by
-- report_jobs, sql/014_reports.sql).

create or replace function pgfleet.describe_exit(p_exit_code integer, p_signal integer,
                                                  p_oom boolean, p_error text)
returns text
language sql immutable as $$
  select case
    -- A process of the job was killed out of memory, the job handled it and
    -- exited 0: it succeeded, and says what happened (oom_killed stays true).
    when p_exit_code = 0 and p_signal is null and p_oom
      then 'exit code 0 (a process of the job was killed out of memory, and the job went on)'
    when p_error is not null and p_error <> '' then p_error
    when p_oom then 'out of memory'
    when p_signal is not null then 'killed by signal ' || p_signal::text
    else 'exit code ' || coalesce(p_exit_code::text, 'unknown')
  end
$$;
comment on function pgfleet.describe_exit(integer, integer, boolean, text) is 'An attempt''s outcome in words.';

-- A report that names a uid (jobs.uid as its host knows the attempt) is about
-- the job of that uid only, not another of the same id (a restored database);
-- a report or a job without one goes by id and attempt. Inlined where used.
create or replace function pgfleet.report_names_job(p_report_uid text, p_job_uid uuid)
returns boolean
language sql immutable parallel safe as $$
  select p_report_uid is null or p_job_uid is null or p_job_uid::text = p_report_uid
$$;
comment on function pgfleet.report_names_job(text, uuid) is
  'Whether a report naming uid p_report_uid (null: none) may apply to a job of uid p_job_uid (null: a job from before uids): unless both are known and differ.';

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
