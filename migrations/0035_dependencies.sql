-- Dependencies by plain INSERT (docs/dependencies.md): jobs.after lists the
-- jobs that must succeed first. A job can only name jobs that exist, that
-- its submitter can see, and whose ids are smaller than its own (ids are
-- generated always, so those are jobs inserted before it): every edge points
-- from a larger id to a smaller one, so there is no cycle. The rules that
-- need other rows are the insert trigger's (sql/024_dependencies.sql); the
-- shape of the list is this domain's, checked only when a value is written.
create domain pgfleet.job_after as bigint[]
  constraint "after must be a one-dimensional array"
    check (value is null or cardinality(value) = 0 or array_ndims(value) = 1)
  constraint "after must list at most 100 jobs"
    check (value is null or cardinality(value) <= 100)
  constraint "after must not contain null"
    check (value is null or array_position(value, null) is null)
  constraint "after must list job ids > 0"
    check (value is null or 0 < all (value));
comment on domain pgfleet.job_after is
  'The shape of jobs.after: a one-dimensional array of at most 100 job ids (> 0), without nulls.';

alter table pgfleet.jobs add column after pgfleet.job_after;
comment on column pgfleet.jobs.after is
  'Jobs that must succeed before this one may be placed (at most 100, each an existing job the submitter can see, with a smaller id: no cycle can be made). Until then the job is pending with not_before = infinity and error ''waiting for job N''; when one of them fails or is cancelled, this job fails naming it. Set at insert only (docs/dependencies.md). Null or empty: none.';
comment on column pgfleet.jobs.not_before is
  'A pending job is not placed before this time: a delayed start set at insert (pgfleet run --at / --in), the retry backoff after a failed attempt, or infinity while it waits for the jobs in after. Null: as soon as it fits.';

-- The edges of jobs that still wait: one row per (waiting job, job it
-- needs), found by the job needed (its primary key) when that job ends.
-- Rows exist only while their job waits, so the table is empty when no
-- dependency is pending and the exit path asks nothing more of it.
create table pgfleet.job_dependencies (
  needs bigint not null,
  job_id bigint not null,
  not_before timestamptz,
  primary key (needs, job_id)
);
comment on table pgfleet.job_dependencies is
  'Edges of the jobs that wait for others (jobs.after): one row per (job needed, waiting job), deleted once the waiting job is released or fails. Written and read only by sql/024_dependencies.sql.';
comment on column pgfleet.job_dependencies.needs is 'The job that must succeed first.';
comment on column pgfleet.job_dependencies.job_id is 'The job that waits for it.';
comment on column pgfleet.job_dependencies.not_before is
  'The waiting job''s own not_before as submitted (a delayed start; the same on each of its rows): restored when it is released.';
create index job_dependencies_job_idx on pgfleet.job_dependencies (job_id);
comment on index pgfleet.job_dependencies_job_idx is 'A waiting job''s edges, by the job.';

-- submit takes after and not_before (sql/011_submit.sql): the old signature
-- goes first (the new one would be an ambiguous overload).
drop function if exists pgfleet.submit(text[], text, integer, integer, jsonb, jsonb, integer,
                                       integer, text, text, text, text, integer, boolean, integer,
                                       integer, text, jsonb, jsonb);
