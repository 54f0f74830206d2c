-- Versions and rolling updates of service and system formations (Nomad's
-- job versions and deployments, Kubernetes' Deployment rollouts). A change
-- of a formation's job template (pgfleet.template_columns()) makes a new
-- version (pgfleet.formation_versions) and a rollout (pgfleet.rollouts),
-- which the formation's scheduler pass carries out under the formation's
-- lock: max_parallel replicas at a time, each old one stopped only once a
-- new one has been healthy for min_healthy_time.

create domain pgfleet.formation_max_parallel as text
  constraint "max_parallel must be a count 1-10000 or a percentage 1%-100%"
    check (value ~ '^[1-9][0-9]{0,4}%?$'
           and (value !~ '%$' or rtrim(value, '%')::integer <= 100)
           and (value ~ '%$' or value::integer <= 10000));

create domain pgfleet.formation_min_healthy_time as interval
  constraint "min_healthy_time must be between 0 and 1 hour"
    check (value >= interval '0' and value <= interval '1 hour');

create domain pgfleet.formation_progress_deadline as interval
  constraint "progress_deadline must be between 1 second and 1 day"
    check (value >= interval '1 second' and value <= interval '1 day');

create domain pgfleet.formation_canary as integer
  constraint "canary must be between 0 and 1000" check (value between 0 and 1000);

alter table pgfleet.formations
  add column version integer not null default 1,
  add column max_parallel pgfleet.formation_max_parallel not null default '1',
  add column min_healthy_time pgfleet.formation_min_healthy_time not null default interval '10 seconds',
  add column canary pgfleet.formation_canary not null default 0,
  add column progress_deadline pgfleet.formation_progress_deadline not null default interval '5 minutes',
  add column auto_revert boolean not null default false;

comment on column pgfleet.formations.version is
  'The version of the job template replicas should run (pgfleet.formation_versions): bumped by every change of a template column, set back by pgfleet.revert. Written only by those; an UPDATE that sets it otherwise is refused.';
comment on column pgfleet.formations.max_parallel is
  'Rolling updates: how many replicas are replaced at a time, a count (''2'') or a percentage of replicas (''25%'', rounded up, at least 1). A rollout keeps at least replicas - max_parallel healthy and at most replicas + max_parallel running.';
comment on column pgfleet.formations.min_healthy_time is
  'Rolling updates: how long a new replica must have been healthy (from its passing health check, or from its start when it has none) before an old one is stopped for it.';
comment on column pgfleet.formations.canary is
  'Rolling updates: how many replicas of a new version start beside the old ones first; the rollout then waits for pgfleet.promote (pgfleet formation promote). 0: no canaries.';
comment on column pgfleet.formations.progress_deadline is
  'Rolling updates: a rollout fails when no new replica has become healthy for this long (counted from its start and from each replica that became healthy); with auto_revert it then rolls back.';
comment on column pgfleet.formations.auto_revert is
  'Rolling updates: a rollout that fails rolls back to the newest earlier version that was healthy.';

create table pgfleet.formation_versions (
  formation_id integer not null references pgfleet.formations (id) on delete cascade,
  version integer not null constraint "version must be >= 1" check (version >= 1),
  template jsonb not null,
  privileged boolean not null default false,
  created_by text not null,
  created_at timestamptz not null default now(),
  changed text[] not null default '{}',
  note text,
  healthy_at timestamptz,
  primary key (formation_id, version)
);
comment on table pgfleet.formation_versions is
  'Every version of a formation''s job template: made by each change of a template column (UPDATE, pgfleet formation update, pgfleet.update_formation) and by creating the formation (version 1).';
comment on column pgfleet.formation_versions.formation_id is 'The formation (pgfleet.formations.id).';
comment on column pgfleet.formation_versions.version is 'Its number, from 1 up, per formation.';
comment on column pgfleet.formation_versions.template is
  'The job template of this version: an object of pgfleet.template_columns() and their values.';
comment on column pgfleet.formation_versions.privileged is
  'Whether the role that wrote this version was privileged (pgfleet_privileged): its replicas may use privileged features only then.';
comment on column pgfleet.formation_versions.created_by is 'The role that made this version (pgfleet.caller()).';
comment on column pgfleet.formation_versions.created_at is 'When it was made.';
comment on column pgfleet.formation_versions.changed is 'The template columns that differ from the version before it.';
comment on column pgfleet.formation_versions.note is 'Why it was made, when not by an edit (e.g. "created").';
comment on column pgfleet.formation_versions.healthy_at is
  'When all of the formation''s replicas last ran this version healthy (a rollout to it finished, or it was the version in force when a rollout began with every replica healthy); null: never. Auto-revert goes back to the newest such version.';

create table pgfleet.rollouts (
  id bigint generated always as identity primary key,
  formation_id integer not null references pgfleet.formations (id) on delete cascade,
  from_version integer,
  to_version integer not null,
  revert boolean not null default false,
  canary integer not null default 0,
  state text not null default 'running'
    constraint "rollout state must be canary, waiting_promotion, running, succeeded, failed, reverted or superseded"
      check (state in ('canary', 'waiting_promotion', 'running', 'succeeded', 'failed', 'reverted',
                       'superseded')),
  started_by text not null,
  started_at timestamptz not null default now(),
  progress_at timestamptz not null default now(),
  promoted_at timestamptz,
  promoted_by text,
  finished_at timestamptz,
  updated integer not null default 0,
  healthy integer not null default 0,
  message text
);
create index rollouts_active_idx on pgfleet.rollouts (formation_id) where finished_at is null;
comment on table pgfleet.rollouts is
  'One row per rollout of a formation version: started by the change that made the version (or a revert), carried out by the schedulers, finished when every replica runs it (succeeded), when it made no progress within progress_deadline (failed, or reverted with auto_revert), or when a newer version replaced it (superseded). Progress: pgfleet.rollout_status.';
comment on column pgfleet.rollouts.id is 'Identity.';
comment on column pgfleet.rollouts.formation_id is 'The formation (pgfleet.formations.id).';
comment on column pgfleet.rollouts.from_version is 'The version in force before it.';
comment on column pgfleet.rollouts.to_version is 'The version it rolls out.';
comment on column pgfleet.rollouts.revert is 'Whether it rolls back to an earlier version (pgfleet.revert, or auto_revert).';
comment on column pgfleet.rollouts.canary is 'Canaries it starts before waiting for promotion (the formation''s canary when it began; 0 for a revert).';
comment on column pgfleet.rollouts.state is
  'canary (canaries starting), waiting_promotion (canaries healthy, waiting for pgfleet.promote), running (replacing max_parallel at a time), succeeded, failed (no progress within progress_deadline), reverted (failed, and rolled back by auto_revert), superseded (a newer version came).';
comment on column pgfleet.rollouts.started_by is 'The role whose change started it.';
comment on column pgfleet.rollouts.started_at is 'When it started.';
comment on column pgfleet.rollouts.progress_at is 'When it last made progress (started, or a new replica became healthy); it fails at progress_at + progress_deadline.';
comment on column pgfleet.rollouts.promoted_at is 'When its canaries were promoted (null: not yet, or no canaries).';
comment on column pgfleet.rollouts.promoted_by is 'Who promoted them.';
comment on column pgfleet.rollouts.finished_at is 'When it ended (null while active).';
comment on column pgfleet.rollouts.updated is 'Live replicas of to_version when it last progressed or ended.';
comment on column pgfleet.rollouts.healthy is 'Healthy replicas of to_version when it last progressed or ended.';
comment on column pgfleet.rollouts.message is 'Why it ended as it did, or what it waits for.';

alter table pgfleet.jobs add column version integer;
comment on column pgfleet.jobs.version is
  'The formation version (pgfleet.formation_versions) a service or system replica was made from; null for jobs inserted directly.';

-- Every formation has its version 1, and the replicas that live now are of it.
insert into pgfleet.formation_versions (formation_id, version, template, privileged, created_by, note)
select f.id, 1,
       (select jsonb_object_agg(e.key, e.value) from jsonb_each(to_jsonb(f)) e
         where e.key = any (array['command', 'env', 'cpu', 'memory', 'constraints', 'priority', 'rootfs',
                                  'run_as', 'network', 'pids_max', 'cpu_hard_limit', 'stop_grace_seconds',
                                  'log_max_files', 'log_max_file_mb', 'disk', 'seccomp', 'health_check'])),
       f.privileged, f.owner, 'existed before versions'
  from pgfleet.formations f;
update pgfleet.jobs j set version = 1
  from pgfleet.formations f
 where f.name = j.formation and f.kind in ('service', 'system')
   and j.state in ('pending', 'assigned', 'running');
-- Rows an earlier migration of this transaction rewrote count as inserted
-- by it, so the update queued checks of the deferred foreign key; run them
-- now, or a later ALTER TABLE of jobs refuses ("pending trigger events").
set constraints pgfleet.jobs_formation_fkey immediate;
