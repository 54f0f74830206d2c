-- Jobs waiting out a retry backoff, by when they may run: a sleeping scheduler
-- wakes at the earliest (pgfleet.next_retry_in), so a retry starts when its
-- backoff ends rather than at the next tick. Rows without a backoff (most
-- jobs) are not in it, so inserts do not pay for it.
create index jobs_retry_at_idx on pgfleet.jobs (not_before)
  where state = 'pending' and not_before is not null;
