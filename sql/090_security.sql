-- Security: what each role may do (docs/security.md), re-applied on every
-- migrate. Reads go through grants and row-level security; every write a
-- role other than the schema's owner may make goes through a path that
-- checks it: INSERT into jobs (jobs_after_insert), formations DML for
-- operators (formations_check_template), and SECURITY DEFINER functions that
-- check the caller first (cancel, scale, set_host_state, drain; and for
-- hosts register_host, heartbeat, report_jobs, host_jobs: pgfleet.require_host).

-- The privileged and network defaults of jobs and formations (migration
-- 0027) ask whether the inserting role is a member of pgfleet_privileged:
-- the schema's owner is made one, so that they agree with
-- pgfleet.caller_privileged() for it too.
do $$
begin
  if not pg_has_role(current_user, 'pgfleet_privileged', 'member') then
    execute format('grant pgfleet_privileged to %I', current_user);
  end if;
end $$;

-- Jobs as each role may see them: a submitter its own, everyone else every
-- job; env values masked unless the caller owns the job or may manage it.
create or replace function pgfleet.sees_every_job() returns boolean
language sql stable as $$
  select pgfleet.has_role(pgfleet.caller(), 'pgfleet_operator')
      or pg_has_role(pgfleet.caller(), 'pgfleet_reader', 'member')
      or pg_has_role(pgfleet.caller(), 'pgfleet_scheduler', 'member')
$$;
comment on function pgfleet.sees_every_job() is
  'True when the caller may see every job (operators, readers, schedulers, admins), not only its own.';

create or replace function pgfleet.sees_every_env() returns boolean
language sql stable as $$
  select pgfleet.has_role(pgfleet.caller(), 'pgfleet_operator')
      or pg_has_role(pgfleet.caller(), 'pgfleet_scheduler', 'member')
$$;
comment on function pgfleet.sees_every_env() is
  'True when the caller may read the env of every job (operators, schedulers, admins); readers see it masked.';

create or replace function pgfleet.masked(p_env jsonb) returns jsonb
language sql immutable as $$
  select coalesce(jsonb_object_agg(k, '********'), '{}') from jsonb_object_keys(p_env) k
$$;
comment on function pgfleet.masked(jsonb) is 'An env object with every value replaced by ********.';

drop view if exists pgfleet.endpoints;  -- reads visible_jobs (095_endpoints.sql)
drop view if exists pgfleet.job_graph;  -- reads visible_jobs (096_job_graph.sql)
drop view if exists pgfleet.visible_jobs;
-- A security barrier: the view's owner filter runs before any function of
-- the caller's query sees a row. Without it, a submitter's own cheap
-- function in WHERE was shown every tenant's rows (command, output tail,
-- error, idempotency key) first (tests/integration/leaky_view_test.cpp).
-- Built-in operators are leakproof, so `where id = 5` still uses the index.
create view pgfleet.visible_jobs with (security_barrier = true) as
select j.id, j.formation, j.command,
       case when j.owner = pgfleet.caller() or pgfleet.sees_every_env() then j.env
            else pgfleet.masked(j.env) end as env,
       j.cpu, j.memory, j.constraints, j.priority, j.max_attempts, j.idempotency_key, j.rootfs,
       j.run_as, j.network, j.pids_max, j.cpu_hard_limit, j.stop_grace_seconds, j.state,
       j.desired_state, j.attempt, j.failures, j.host_losses, j.not_before, j.host_id, j.pid,
       j.exit_code, j.signal, j.oom_killed, j.error, j.output_tail, j.peak_memory_bytes,
       j.cpu_seconds, j.created_at, j.assigned_at, j.started_at, j.finished_at,
       j.requeue_on_stop, j.owner, j.privileged, j.log_max_files, j.log_max_file_mb, j.disk, j.seccomp,
       j.health_check, j.health, j.health_at, j.health_output, j.ports, j.host_ports, j.address,
       j.preemptible, j.preempted_by, j.preempting,
       j.after,
       case when j.owner = pgfleet.caller() or pgfleet.sees_every_env() then j.files end as files,
       u.cpu_cores as cpu_used, u.memory_bytes as memory_used_bytes, u.sampled_at as usage_at
  from pgfleet.jobs j
  -- live usage of the running attempt, as its host last measured it
  left join pgfleet.job_usage u
    on j.state = 'running' and u.job_id = j.id and u.attempt = j.attempt and u.host_id = j.host_id
 where j.owner = pgfleet.caller() or pgfleet.sees_every_job();
comment on view pgfleet.visible_jobs is
  'pgfleet.jobs as the caller may see it: a submitter its own jobs, operators, readers and schedulers every job; env values masked (********) and files null for readers and for jobs the caller does not own; cpu_used (cores), memory_used_bytes and usage_at: what a running attempt uses now (pgfleet.job_usage). The CLI reads jobs here.';

-- Nobody outside the roles reaches the schema.
revoke all on schema pgfleet from public;
grant usage on schema pgfleet
  to pgfleet_submitter, pgfleet_operator, pgfleet_reader, pgfleet_scheduler, pgfleet_host;
revoke all on all tables in schema pgfleet
  from public, pgfleet_submitter, pgfleet_operator, pgfleet_reader, pgfleet_scheduler, pgfleet_host;

-- Everyone who may look: the status views (they count, never show env).
grant select on pgfleet.host_status, pgfleet.formation_status, pgfleet.cluster_summary, pgfleet.rollout_status,
                pgfleet.visible_jobs, pgfleet.hosts, pgfleet.settings_in_force, pgfleet.formation_locks
  to pgfleet_submitter, pgfleet_reader, pgfleet_scheduler;
-- Settings (host TTL, limits) are read by every role's functions and views.
grant select on pgfleet.settings
  to pgfleet_submitter, pgfleet_reader, pgfleet_scheduler, pgfleet_host;

-- Submitters: insert jobs (every column: jobs_after_insert refuses what a
-- submitter may not set, naming the column), read their own jobs and events.
-- Every column but id: ids are the identity's, never the submitter's (with
-- OVERRIDING SYSTEM VALUE an id <= 0 made every dispatch batch holding it
-- fail, and future ids made other tenants' inserts fail as duplicates).
grant select on pgfleet.jobs to pgfleet_submitter;
revoke insert on pgfleet.jobs from pgfleet_submitter;
do $$
begin
  execute (select format('grant insert (%s) on pgfleet.jobs to pgfleet_submitter',
                         string_agg(quote_ident(attname), ', ' order by attnum))
             from pg_attribute
            where attrelid = 'pgfleet.jobs'::regclass and attnum > 0 and not attisdropped
              and attname <> 'id');
end $$;
grant select on pgfleet.job_events to pgfleet_submitter;

-- Operators (members of pgfleet_submitter): every job and event, formations,
-- settings and host logins; hosts through set_host_state and drain.
grant select on all tables in schema pgfleet to pgfleet_operator;
-- Not the hosts' ticket keys: with one, an operator could sign a privileged dispatch.
revoke select on pgfleet.host_keys from pgfleet_operator;
grant insert, update, delete on pgfleet.formations, pgfleet.host_logins to pgfleet_operator;
grant insert, update on pgfleet.settings to pgfleet_operator;
grant insert, update, delete on pgfleet.role_limits to pgfleet_operator;

-- Readers: everything but job env, which visible_jobs shows masked.
grant select on pgfleet.formations, pgfleet.job_events, pgfleet.host_heartbeats,
                pgfleet.schedulers, pgfleet.settings, pgfleet.allocation_drift,
                pgfleet.formation_versions, pgfleet.rollouts
  to pgfleet_reader;
do $$
begin
  execute (select format('grant select (%s) on pgfleet.jobs to pgfleet_reader',
                         string_agg(quote_ident(attname), ', ' order by attnum))
             from pg_attribute
            where attrelid = 'pgfleet.jobs'::regclass and attnum > 0 and not attisdropped
              and attname <> 'env');
end $$;

-- Schedulers: place, dispatch, sweep and prune.
grant select on all tables in schema pgfleet to pgfleet_scheduler;
grant insert, update, delete on pgfleet.jobs, pgfleet.job_events, pgfleet.hosts,
                                pgfleet.host_heartbeats, pgfleet.schedulers
  to pgfleet_scheduler;
-- The lost-host sweep's guard (sql/015_failures.sql; migration 0019, so
-- these grants are skipped on the older schemas the migration tests build
-- under today's sql/).
do $$
begin
  if to_regclass('pgfleet.host_loss_guard') is not null then
    grant update on pgfleet.host_loss_guard to pgfleet_scheduler;
    grant insert on pgfleet.host_loss_events to pgfleet_scheduler;
    grant select on pgfleet.host_loss_guard, pgfleet.host_loss_events to pgfleet_reader;
  end if;
end $$;

-- Hosts: nothing on tables; only register_host, heartbeat, report_jobs and
-- host_jobs, for the hosts pgfleet.host_logins binds their login to.

-- Row-level security: who sees which jobs and events. The schema's owner
-- (and superusers) bypass it.
alter table pgfleet.jobs enable row level security;
alter table pgfleet.job_events enable row level security;
drop policy if exists own_jobs on pgfleet.jobs;
create policy own_jobs on pgfleet.jobs for select to pgfleet_submitter
  using (owner = pgfleet.caller());
drop policy if exists submit_jobs on pgfleet.jobs;
-- (jobs_after_insert checks owner and privileges, naming the column.)
create policy submit_jobs on pgfleet.jobs for insert to pgfleet_submitter with check (true);
drop policy if exists read_all_jobs on pgfleet.jobs;
create policy read_all_jobs on pgfleet.jobs for select to pgfleet_operator, pgfleet_reader
  using (true);
drop policy if exists schedule_jobs on pgfleet.jobs;
create policy schedule_jobs on pgfleet.jobs for all to pgfleet_scheduler
  using (true) with check (true);
drop policy if exists own_job_events on pgfleet.job_events;
create policy own_job_events on pgfleet.job_events for select to pgfleet_submitter
  using (exists (select 1 from pgfleet.jobs j where j.id = job_id and j.owner = pgfleet.caller()));
drop policy if exists read_all_job_events on pgfleet.job_events;
create policy read_all_job_events on pgfleet.job_events for select
  to pgfleet_operator, pgfleet_reader using (true);
drop policy if exists schedule_job_events on pgfleet.job_events;
create policy schedule_job_events on pgfleet.job_events for all to pgfleet_scheduler
  using (true) with check (true);
