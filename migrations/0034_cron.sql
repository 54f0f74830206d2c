-- Cron formations (kind = 'cron'): the template run once per due time of a
-- cron expression read in an IANA time zone (sql/024_cron.sql, docs/cron.md).
-- Each due time makes at most one job, whatever the number of schedulers or
-- their restarts: jobs.due_at is unique per formation.
alter table pgfleet.formations
  drop constraint "kind must be service, batch, system or sysbatch",
  add constraint "kind must be service, batch, system, sysbatch or cron"
    check (kind in ('service', 'batch', 'system', 'sysbatch', 'cron')),
  drop constraint "a service, system or sysbatch formation needs a command",
  add constraint "a service, system, sysbatch or cron formation needs a command"
    check (kind = 'batch' or command is not null),
  add column cron text,
  add column time_zone text,
  add column overlap text not null default 'skip',
  add column catch_up integer not null default 1,
  add column last_due_at timestamptz,
  add column next_due_at timestamptz,
  add constraint "a cron formation needs cron and time_zone"
    check (kind <> 'cron' or (cron is not null and time_zone is not null)),
  add constraint "only a cron formation has cron, time_zone or due times"
    check (kind = 'cron' or (cron is null and time_zone is null and last_due_at is null
                             and next_due_at is null)),
  add constraint "overlap must be skip, allow or cancel_previous"
    check (overlap in ('skip', 'allow', 'cancel_previous')),
  add constraint "catch_up must be between 1 and 100" check (catch_up between 1 and 100);

comment on column pgfleet.formations.kind is
  'service (keep replicas running, restart forever with backoff), system (one such replica on every eligible host: up, admitted, matching its constraints, isolating its jobs unless it is privileged; replicas move with the hosts, not to other hosts), sysbatch (run the template once to completion on every such host, and on each host that becomes eligible, until done_at is set), cron (run the template once per due time of cron in time_zone, docs/cron.md) or batch (run each job to completion, retry up to max_attempts).';
comment on column pgfleet.formations.cron is
  'Cron formations: when to run, 5 fields (minute hour day-of-month month day-of-week; *, lists, ranges, steps, names, 7 = Sunday; day-of-month and day-of-week both restricted: either matches) or @hourly, @daily, @weekly, @monthly, @yearly. A leading 6th field of seconds only while the operator setting cron_seconds_field is 1 (tests). Checked when written (pgfleet.cron_problem).';
comment on column pgfleet.formations.time_zone is
  'Cron formations: the IANA time zone (a name of pg_timezone_names, e.g. Europe/Paris) cron is read in. A wall time a daylight-saving jump skips runs once at the first minute after the jump; a wall time that repeats runs once, at its first occurrence.';
comment on column pgfleet.formations.overlap is
  'Cron formations: what a due time does while an earlier run of the formation (a job it made, not finished) is live: skip (make no job; an event on the live job says so), allow (run both) or cancel_previous (stop the live ones, then run).';
comment on column pgfleet.formations.catch_up is
  'Cron formations: after schedulers were down, how many of the most recent missed due times (at most 7 days back) get a job, 1-100; the others are recorded on the first job made. With overlap skip or cancel_previous only the most recent one runs (the runs must not overlap).';
comment on column pgfleet.formations.last_due_at is
  'Cron formations: the latest due time a scheduler has handled (made its job, or skipped it); null before the first.';
comment on column pgfleet.formations.next_due_at is
  'Cron formations: the next due time (pgfleet.cron_next from when cron, time_zone or the formation was (re)created, then from each tick); schedulers tick the formation once it has come.';

create index formations_cron_due_idx on pgfleet.formations (next_due_at)
  where kind = 'cron' and deleted_at is null;
comment on index pgfleet.formations_cron_due_idx is
  'Cron formations by next due time: which to tick, and when a sleeping scheduler must wake (pgfleet.next_retry_in).';

alter table pgfleet.jobs add column due_at timestamptz;
comment on column pgfleet.jobs.due_at is
  'A cron formation''s job: the due time it runs for (unique per formation, so each due time makes one job however many schedulers tick). Written only by schedulers; null for every other job.';

create unique index jobs_formation_due_at_key on pgfleet.jobs (formation, due_at)
  where due_at is not null;
comment on index pgfleet.jobs_formation_due_at_key is
  'One job per cron formation and due time (pgfleet.cron_tick inserts on conflict do nothing).';
create index jobs_cron_live_idx on pgfleet.jobs (formation)
  where due_at is not null and state in ('pending', 'assigned', 'running');
comment on index pgfleet.jobs_cron_live_idx is
  'A cron formation''s live runs, which its overlap rule looks at each due time.';
