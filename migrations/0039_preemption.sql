-- Preemption (issue 38, docs/preemption.md): a pending job that fits on no
-- host may have a scheduler stop preemptible jobs of strictly lower priority
-- on one host to make room (pgfleet.preempt), within each formation's
-- disruption budget (formations.min_available).

alter table pgfleet.jobs
  add column preemptible boolean not null default true,
  add column preempted_by bigint,
  add column preempting bigint[];
comment on column pgfleet.jobs.preemptible is
  'Whether a scheduler may stop this job to make room for a pending job of strictly higher priority (docs/preemption.md). Default true for a job you insert; a replica of a service or system formation takes its formation''s preemptible (default false), a sysbatch job its formation''s (default true). A batch job set false runs to its end.';
comment on column pgfleet.jobs.preempted_by is
  'While this job is being stopped to make room (pgfleet.preempt): the job it makes room for. Set by pgfleet, cleared when the attempt ends (a batch job then goes back to pending as a new attempt that does not count against max_attempts; a service or system replica is replaced by its formation).';
comment on column pgfleet.jobs.preempting is
  'The jobs a scheduler last stopped to make room for this one (pgfleet.preempt). While any of them is still stopping, this job waits for them and preempts no more. Set by pgfleet.';

alter table pgfleet.formations
  add column preemptible boolean,
  add column min_available integer
    constraint "min_available must be >= 0" check (min_available >= 0),
  add constraint "min_available must be <= replicas for a service formation"
    check (min_available is null or kind <> 'service' or min_available <= replicas);
comment on column pgfleet.formations.preemptible is
  'Whether the jobs this formation makes (service and system replicas, sysbatch jobs) may be preempted: copied into jobs.preemptible of each, and into its live ones when changed. Null: the kind''s default, false for service and system formations, true otherwise. Jobs inserted into a batch formation keep their own jobs.preemptible.';
comment on column pgfleet.formations.min_available is
  'The disruption budget: preemption never leaves fewer than this many of the formation''s jobs running (state running, desired_state run); a job still starting or being stopped does not count. 0 to replicas for a service. Null: no budget (any of its preemptible jobs may be stopped).';

-- Replicas made before this migration are the service's and system's own:
-- not preemptible, as a new one would be.
update pgfleet.jobs j set preemptible = false
  from pgfleet.formations f
 where f.name = j.formation and f.kind in ('service', 'system')
   and j.state in ('pending', 'assigned', 'running');

-- The jobs being preempted now (pgfleet.preemptions): few, and no entry
-- for any other job.
create index jobs_preempted_by_idx on pgfleet.jobs (preempted_by) where preempted_by is not null;
comment on index pgfleet.jobs_preempted_by_idx is
  'Jobs being stopped to make room for another (jobs.preempted_by), for pgfleet.preemptions.';
