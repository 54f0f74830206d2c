-- An operator's or owner's force stop (pgfleet.force_stop, `pgfleet stop
-- --force`): the job is killed at once, without waiting out its
-- stop_grace_seconds.
alter table pgfleet.jobs add column stop_force boolean not null default false;
comment on column pgfleet.jobs.stop_force is
  'Set by pgfleet.force_stop: the host kills the attempt at once (SIGKILL) instead of SIGTERM and stop_grace_seconds. Owned by pgfleet (refused at insert).';
