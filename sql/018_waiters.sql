-- Waiting for jobs without polling: a session LISTENs on pgfleet.job_channel()
-- and registers the jobs it waits for with pgfleet.watch_jobs; whatever
-- changes one of them (a host's report, a stop) calls pgfleet.notify_waiters.

create or replace function pgfleet.job_channel() returns text
language sql immutable parallel safe as $$ select 'pgfleet_job' $$;
comment on function pgfleet.job_channel() is
  'The NOTIFY channel on which a watched job''s id is sent when its state changes (pgfleet.watch_jobs).';

create or replace function pgfleet.watch_jobs(p_jobs bigint[]) returns integer
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_count integer;
begin
  -- Waiters whose session is gone (it ended without unwatch_jobs).
  delete from pgfleet.job_waiters w
   where not exists (select 1 from pg_stat_activity a where a.pid = w.pid);
  -- Only jobs the caller may see (row-level security does not apply in here).
  insert into pgfleet.job_waiters (job_id, pid)
  select j.id, pg_backend_pid() from pgfleet.jobs j
   where j.id = any(p_jobs) and (j.owner = pgfleet.caller() or pgfleet.sees_every_job())
  on conflict do nothing;
  get diagnostics v_count = row_count;
  return v_count;
end $$;
comment on function pgfleet.watch_jobs(bigint[]) is
  'Registers this session as waiting for these jobs (those the caller may see): from now on each change of their state NOTIFYs pgfleet.job_channel() with the job id. LISTEN first, then watch, then read the jobs. Returns how many were registered.';

create or replace function pgfleet.unwatch_jobs() returns void
language sql security definer set search_path = pgfleet, pg_temp as $$
  delete from pgfleet.job_waiters where pid = pg_backend_pid()
$$;
comment on function pgfleet.unwatch_jobs() is 'This session waits for no job any more.';

-- PL/pgSQL rather than SQL: its plan is kept per session, and it runs with
-- every report batch (an index probe of an empty table when nobody waits).
create or replace function pgfleet.notify_waiters(p_jobs bigint[]) returns void
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  if p_jobs is null or cardinality(p_jobs) = 0 then
    return;
  end if;
  -- pg_notify folds identical notifications of one transaction into one.
  perform pg_notify(pgfleet.job_channel(), w.job_id::text)
     from pgfleet.job_waiters w where w.job_id = any(p_jobs);
end $$;
comment on function pgfleet.notify_waiters(bigint[]) is
  'NOTIFYs pgfleet.job_channel() with the id of each of these jobs some session waits for (pgfleet.watch_jobs); nothing for the others.';
