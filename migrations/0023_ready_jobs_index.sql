-- A formation's pass reads only jobs that may run now. The pending jobs'
-- index also held every job waiting for a future not_before, and the claim
-- ((not_before is null or not_before <= now()) in priority order) walked past
-- all of them: 300,000 parked rows made every pass of their formation read
-- them all. Ready jobs (no not_before) now have this index; jobs with a
-- not_before are found through jobs_retry_at_idx (not_before), due ones only.
-- A job is in one of the two, never both: no index write more per job.
create index if not exists jobs_ready_idx on pgfleet.jobs (formation, priority desc, id)
  where state = 'pending' and not_before is null;
drop index if exists pgfleet.jobs_pending_idx;
