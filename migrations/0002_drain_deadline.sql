-- Drain deadlines: batch jobs on a draining host run to completion unless the
-- deadline passes; then they are stopped there and requeued elsewhere.
alter table pgfleet.hosts add column drain_deadline timestamptz;
comment on column pgfleet.hosts.drain_deadline is
  'Draining hosts: when their remaining batch jobs are stopped and requeued elsewhere (null = let them finish).';
alter table pgfleet.jobs add column requeue_on_stop boolean not null default false;
comment on column pgfleet.jobs.requeue_on_stop is
  'Set with desired_state = stop when the stop is not the job''s end (drain deadline): once stopped, the job goes back to pending for a new attempt instead of cancelled.';
create index jobs_stop_requested_idx on pgfleet.jobs (host_id) where desired_state = 'stop' and state in ('assigned', 'running');
