-- pgfleet schema, version 1: tables and their invariants.
-- Functions, views and triggers live in sql/ and are re-created on every migrate.
-- CHECK constraints are named after the rule they enforce, so a bad INSERT
-- fails with e.g. 'violates check constraint "cpu must be > 0"'.

create table pgfleet.settings (
  name text primary key,
  value text not null
);
comment on table pgfleet.settings is 'Cluster-wide settings shared by all daemons (name -> value).';
comment on column pgfleet.settings.name is 'Setting name, e.g. host_ttl_seconds.';
comment on column pgfleet.settings.value is 'Setting value, as text.';
insert into pgfleet.settings (name, value) values ('host_ttl_seconds', '10');

create table pgfleet.formations (
  id integer generated always as identity primary key,
  name text not null
    constraint "formation name must be unique" unique
    constraint "formation name must be 1-100 of A-Z a-z 0-9 . _ -"
      check (name ~ '^[A-Za-z0-9._-]{1,100}$'),
  kind text not null default 'batch'
    constraint "kind must be 'service' or 'batch'" check (kind in ('service', 'batch')),
  replicas integer not null default 0
    constraint "replicas must be >= 0" check (replicas >= 0),
  command text[]
    constraint "command must be a non-empty array without nulls"
      check (command is null or (cardinality(command) > 0 and array_position(command, null) is null
                                 and command[1] <> '')),
  env jsonb not null default '{}'
    constraint "env must be an object of strings"
      check (jsonb_typeof(env) = 'object' and not jsonb_path_exists(env, '$.* ? (@.type() != "string")')),
  cpu integer not null default 100 constraint "cpu must be > 0" check (cpu > 0),
  memory integer not null default 64 constraint "memory must be > 0" check (memory > 0),
  constraints jsonb not null default '{}'
    constraint "constraints must be an object of strings"
      check (jsonb_typeof(constraints) = 'object'
             and not jsonb_path_exists(constraints, '$.* ? (@.type() != "string")')),
  priority integer not null default 50
    constraint "priority must be between 0 and 100" check (priority between 0 and 100),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint "a service formation needs a command" check (kind <> 'service' or command is not null)
);
comment on table pgfleet.formations is
  'Named groups of jobs: the unit of scheduling locks and ownership. A batch formation is a queue of one-off jobs; a service formation keeps `replicas` copies of its job template running.';
comment on column pgfleet.formations.id is 'Identity; the second key of the formation advisory lock pg_try_advisory_xact_lock(pgfleet.lock_class(), id).';
comment on column pgfleet.formations.name is 'Unique name; jobs refer to it. Inserting a job into an unknown name creates a batch formation.';
comment on column pgfleet.formations.kind is 'service (keep replicas running, restart forever with backoff) or batch (run each job to completion, retry up to max_attempts).';
comment on column pgfleet.formations.replicas is 'Service formations: how many copies to keep running.';
comment on column pgfleet.formations.command is 'Job template: argv of each replica (service formations).';
comment on column pgfleet.formations.env is 'Job template: environment of each replica, an object of strings.';
comment on column pgfleet.formations.cpu is 'Job template: CPU per replica in millicores.';
comment on column pgfleet.formations.memory is 'Job template: memory per replica in MiB.';
comment on column pgfleet.formations.constraints is 'Job template: host labels each replica requires (label -> value).';
comment on column pgfleet.formations.priority is 'Job template: priority of each replica, 0-100.';
comment on column pgfleet.formations.created_at is 'When the formation was created.';
comment on column pgfleet.formations.updated_at is 'When the formation was last changed.';
insert into pgfleet.formations (name) values ('default');

create table pgfleet.hosts (
  id text primary key
    constraint "host id must be 1-100 of A-Z a-z 0-9 . _ -" check (id ~ '^[A-Za-z0-9._-]{1,100}$'),
  api_url text not null constraint "api_url must be an http URL" check (api_url ~ '^https?://'),
  cpu integer not null constraint "cpu must be > 0" check (cpu > 0),
  memory integer not null constraint "memory must be > 0" check (memory > 0),
  cpu_allocated integer not null default 0
    constraint "cpu_allocated must be between 0 and cpu" check (cpu_allocated between 0 and cpu),
  memory_allocated integer not null default 0
    constraint "memory_allocated must be between 0 and memory"
      check (memory_allocated between 0 and memory),
  labels jsonb not null default '{}'
    constraint "labels must be an object of strings"
      check (jsonb_typeof(labels) = 'object'
             and not jsonb_path_exists(labels, '$.* ? (@.type() != "string")')),
  state text not null default 'up'
    constraint "host state must be up, draining, offline or lost"
      check (state in ('up', 'draining', 'offline', 'lost')),
  suspended_until timestamptz,
  suspensions integer not null default 0,
  generation bigint not null default 1,
  driver text not null default 'process',
  driver_note text,
  registered_at timestamptz not null default now()
);
comment on table pgfleet.hosts is 'Machines running pgfleet-hostd, their capacity and what is allocated on them.';
comment on column pgfleet.hosts.id is 'Host id given to hostd with --id.';
comment on column pgfleet.hosts.api_url is 'Where schedulers reach the host''s API (hostd --advertise).';
comment on column pgfleet.hosts.cpu is 'Total CPU in millicores.';
comment on column pgfleet.hosts.memory is 'Total memory in MiB.';
comment on column pgfleet.hosts.cpu_allocated is 'Millicores held by the jobs assigned to or running on this host. Never above cpu.';
comment on column pgfleet.hosts.memory_allocated is 'MiB held by the jobs assigned to or running on this host. Never above memory.';
comment on column pgfleet.hosts.labels is 'Labels (label -> value) that job constraints match against.';
comment on column pgfleet.hosts.state is 'up; draining (no new work); offline (taken out by an operator); lost (heartbeat expired).';
comment on column pgfleet.hosts.suspended_until is 'No placements before this time: set after failed dispatches, with exponential backoff.';
comment on column pgfleet.hosts.suspensions is 'Consecutive failed dispatches; drives the suspension backoff; reset by a successful dispatch.';
comment on column pgfleet.hosts.generation is 'Bumped at each registration; fences reports from a previous life of the host.';
comment on column pgfleet.hosts.driver is 'Driver running this host''s jobs: container, process or sim.';
comment on column pgfleet.hosts.driver_note is 'Why that driver was chosen (e.g. why hostd fell back to process).';
comment on column pgfleet.hosts.registered_at is 'Time of the latest registration.';

create table pgfleet.host_heartbeats (
  host_id text primary key references pgfleet.hosts (id) on delete cascade,
  last_seen timestamptz not null default now(),
  generation bigint not null,
  running_jobs integer not null default 0
);
comment on table pgfleet.host_heartbeats is 'One row per host, rewritten every heartbeat interval. Kept apart from hosts so heartbeats never contend with placement updates.';
comment on column pgfleet.host_heartbeats.host_id is 'The host.';
comment on column pgfleet.host_heartbeats.last_seen is 'Database clock (now()) at the latest heartbeat; hosts are judged by the same clock, so host clock skew does not matter.';
comment on column pgfleet.host_heartbeats.generation is 'Generation of the hostd that wrote the heartbeat.';
comment on column pgfleet.host_heartbeats.running_jobs is 'Jobs the host was running at the heartbeat.';

create table pgfleet.jobs (
  id bigint generated always as identity primary key,
  formation text not null default 'default'
    references pgfleet.formations (name) on update cascade deferrable initially deferred,
  command text[] not null
    constraint "command must be a non-empty array without nulls"
      check (cardinality(command) > 0 and array_position(command, null) is null and command[1] <> ''),
  env jsonb not null default '{}'
    constraint "env must be an object of strings"
      check (jsonb_typeof(env) = 'object' and not jsonb_path_exists(env, '$.* ? (@.type() != "string")')),
  cpu integer not null default 100 constraint "cpu must be > 0" check (cpu > 0),
  memory integer not null default 64 constraint "memory must be > 0" check (memory > 0),
  constraints jsonb not null default '{}'
    constraint "constraints must be an object of strings"
      check (jsonb_typeof(constraints) = 'object'
             and not jsonb_path_exists(constraints, '$.* ? (@.type() != "string")')),
  priority integer not null default 50
    constraint "priority must be between 0 and 100" check (priority between 0 and 100),
  max_attempts integer not null default 1
    constraint "max_attempts must be >= 1" check (max_attempts >= 1),
  idempotency_key text constraint "idempotency_key must be unique" unique,
  rootfs text,
  run_as text,
  network text not null default 'host'
    constraint "network must be 'host' or 'none'" check (network in ('host', 'none')),
  pids_max integer not null default 1024 constraint "pids_max must be > 0" check (pids_max > 0),
  cpu_hard_limit boolean not null default false,
  stop_grace_seconds integer not null default 10
    constraint "stop_grace_seconds must be >= 0" check (stop_grace_seconds >= 0),
  state text not null default 'pending'
    constraint "state must be a job state (see COMMENT ON COLUMN jobs.state)"
      check (state in ('pending', 'assigned', 'running', 'succeeded', 'failed', 'cancelled')),
  desired_state text not null default 'run'
    constraint "desired_state must be 'run' or 'stop'" check (desired_state in ('run', 'stop')),
  attempt integer not null default 0 constraint "attempt must be >= 0" check (attempt >= 0),
  failures integer not null default 0,
  host_losses integer not null default 0,
  not_before timestamptz,
  host_id text,
  pid integer,
  exit_code integer,
  signal integer,
  oom_killed boolean,
  error text,
  output_tail text,
  peak_memory_bytes bigint,
  cpu_seconds double precision,
  created_at timestamptz not null default now(),
  assigned_at timestamptz,
  started_at timestamptz,
  finished_at timestamptz,
  constraint "an assigned or running job needs a host_id"
    check (state not in ('assigned', 'running') or host_id is not null)
);
comment on table pgfleet.jobs is
  'One row per job, the user''s handle for its whole life: retries and moves are new attempts of the same row; each attempt''s story is in pgfleet.job_events. Insert rows to submit work.';
comment on column pgfleet.jobs.id is 'Job id.';
comment on column pgfleet.jobs.formation is 'Formation the job belongs to (default ''default''); an unknown name creates a batch formation.';
comment on column pgfleet.jobs.command is 'argv to execute; never passed to a shell.';
comment on column pgfleet.jobs.env is 'Environment variables, an object of strings.';
comment on column pgfleet.jobs.cpu is 'CPU in millicores (1000 = one core).';
comment on column pgfleet.jobs.memory is 'Memory limit in MiB.';
comment on column pgfleet.jobs.constraints is 'Host labels required (label -> value); all must match.';
comment on column pgfleet.jobs.priority is '0-100; higher-priority pending jobs are placed first when capacity is short.';
comment on column pgfleet.jobs.max_attempts is 'How many times a failing batch job runs before it stays failed.';
comment on column pgfleet.jobs.idempotency_key is 'Optional client key; submitting twice with the same key returns the first job.';
comment on column pgfleet.jobs.rootfs is 'Container root filesystem: a directory, or a name under hostd''s data dir; null = host filesystem read-only.';
comment on column pgfleet.jobs.run_as is 'User the job runs as (container driver default: nobody).';
comment on column pgfleet.jobs.network is 'host (share the host network) or none (own empty network namespace).';
comment on column pgfleet.jobs.pids_max is 'Maximum number of processes of the job (pids cgroup).';
comment on column pgfleet.jobs.cpu_hard_limit is 'Also cap CPU at `cpu` millicores with a CFS quota (otherwise cpu is a share).';
comment on column pgfleet.jobs.stop_grace_seconds is 'Seconds between SIGTERM and SIGKILL when the job is stopped.';
comment on column pgfleet.jobs.state is 'pending -> assigned -> running -> succeeded | failed; or cancelled; back to pending for a new attempt.';
comment on column pgfleet.jobs.desired_state is 'run, or stop when the user cancelled a job that is assigned or running.';
comment on column pgfleet.jobs.attempt is 'Attempt number, incremented at each assignment; the fencing token for every report from hosts.';
comment on column pgfleet.jobs.failures is 'Attempts that ran and failed; counts against max_attempts.';
comment on column pgfleet.jobs.host_losses is 'Attempts lost with their host; does not count against max_attempts (capped separately).';
comment on column pgfleet.jobs.not_before is 'A pending job is not placed before this time (retry backoff).';
comment on column pgfleet.jobs.host_id is 'Host of the current (or last) attempt.';
comment on column pgfleet.jobs.pid is 'Host pid of the current attempt''s main process.';
comment on column pgfleet.jobs.exit_code is 'Exit code of the last attempt, if it exited.';
comment on column pgfleet.jobs.signal is 'Signal that killed the last attempt, if any.';
comment on column pgfleet.jobs.oom_killed is 'True when the last attempt was killed for exceeding its memory limit.';
comment on column pgfleet.jobs.error is 'Why the job failed, or why it is still pending.';
comment on column pgfleet.jobs.output_tail is 'Last 4 KiB of the last attempt''s output (stdout and stderr).';
comment on column pgfleet.jobs.peak_memory_bytes is 'Peak memory of the last attempt.';
comment on column pgfleet.jobs.cpu_seconds is 'CPU time (user + system) of the last attempt.';
comment on column pgfleet.jobs.created_at is 'When the job was inserted.';
comment on column pgfleet.jobs.assigned_at is 'When the current attempt was assigned to a host.';
comment on column pgfleet.jobs.started_at is 'When the current attempt started running.';
comment on column pgfleet.jobs.finished_at is 'When the job reached a final state.';

-- Claims scan only pending rows; without this index claims slow down as finished rows pile up.
create index jobs_pending_idx on pgfleet.jobs (formation, priority desc, id) where state = 'pending';
create index jobs_live_by_host_idx on pgfleet.jobs (host_id) where state in ('assigned', 'running');
create index jobs_finished_at_idx on pgfleet.jobs (finished_at) where finished_at is not null;

create table pgfleet.job_events (
  id bigint generated always as identity primary key,
  job_id bigint not null references pgfleet.jobs (id) on delete cascade,
  attempt integer not null,
  at timestamptz not null default now(),
  kind text not null,
  host_id text,
  detail text
);
comment on table pgfleet.job_events is 'Every state transition of every job attempt, one row each.';
comment on column pgfleet.job_events.id is 'Event id, increasing.';
comment on column pgfleet.job_events.job_id is 'The job.';
comment on column pgfleet.job_events.attempt is 'The attempt the event belongs to.';
comment on column pgfleet.job_events.at is 'When it happened (database clock).';
comment on column pgfleet.job_events.kind is 'created, assigned, running, exited, succeeded, failed, requeued, lost, stop_requested, cancelled, dispatch_failed, ...';
comment on column pgfleet.job_events.host_id is 'Host involved, if any.';
comment on column pgfleet.job_events.detail is 'Details in words (exit code, reason, error).';
create index job_events_job_idx on pgfleet.job_events (job_id, id);

create table pgfleet.schedulers (
  id text primary key,
  hostname text not null,
  pid integer not null,
  started_at timestamptz not null default now(),
  last_seen timestamptz not null default now()
);
comment on table pgfleet.schedulers is 'Running pgfleet-schedulerd daemons and their heartbeats.';
comment on column pgfleet.schedulers.id is 'Scheduler id (--id, default hostname-pid).';
comment on column pgfleet.schedulers.hostname is 'Machine the scheduler runs on.';
comment on column pgfleet.schedulers.pid is 'Process id of the scheduler.';
comment on column pgfleet.schedulers.started_at is 'When it started.';
comment on column pgfleet.schedulers.last_seen is 'Its latest heartbeat (database clock).';
