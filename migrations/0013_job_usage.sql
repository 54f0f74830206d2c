-- What each running attempt uses now, as its host last measured it (hostd
-- --usage-interval), sent with a heartbeat. Unlogged: a live reading, not
-- history; a crash empties it and the next heartbeats fill it again, and
-- writing it costs no WAL. The attempt's own row in jobs is not touched, so
-- usage adds no dead tuples to the hot table.
create unlogged table pgfleet.job_usage (
  job_id bigint not null,
  attempt integer not null,
  host_id text not null,
  cpu_cores real not null,
  memory_bytes bigint not null,
  sampled_at timestamptz not null default now(),
  primary key (job_id, attempt, host_id)
);
create index job_usage_host on pgfleet.job_usage (host_id);
comment on table pgfleet.job_usage is
  'Live usage of running attempts, replaced by each host''s heartbeat every --usage-interval (hostd). Read it through pgfleet.visible_jobs and pgfleet.host_status.';
comment on column pgfleet.job_usage.job_id is 'The job (pgfleet.jobs.id).';
comment on column pgfleet.job_usage.attempt is 'Its attempt the reading is of: shown only while that attempt runs.';
comment on column pgfleet.job_usage.host_id is 'The host that measured it (the one whose heartbeat carried it).';
comment on column pgfleet.job_usage.cpu_cores is
  'CPU in use over the last interval, in cores (1.0 = one core busy); over the whole attempt at its first reading.';
comment on column pgfleet.job_usage.memory_bytes is
  'Memory in use: the cgroup''s memory.current (container driver), or the resident set of the job''s process group (process driver).';
comment on column pgfleet.job_usage.sampled_at is 'When the host''s heartbeat carrying it arrived (database clock).';
