-- Sessions waiting for jobs (pgfleet wait, run --wait). The functions that
-- change a job's state NOTIFY pgfleet.job_channel() with its id when, and
-- only when, some session waits for it: a job nobody waits for costs no
-- NOTIFY (a NOTIFY serializes its commit with every other notifying one).
-- Unlogged: a waiter lives no longer than its session.
create unlogged table pgfleet.job_waiters (
  job_id bigint not null,
  pid integer not null,
  since timestamptz not null default now(),
  primary key (job_id, pid)
);
comment on table pgfleet.job_waiters is
  'Which sessions (backend pid) wait for which jobs: pgfleet.watch_jobs adds rows, pgfleet.unwatch_jobs and later watch_jobs calls remove them. Changes to a watched job NOTIFY pgfleet.job_channel() with its id.';
comment on column pgfleet.job_waiters.job_id is 'The job waited for.';
comment on column pgfleet.job_waiters.pid is 'The waiting session''s backend pid (pg_backend_pid()).';
comment on column pgfleet.job_waiters.since is 'When the session began waiting.';
