-- Limits (issue 38): how many of a formation's jobs may be placed at once
-- (formations.max_running), what one owner may hold of the cluster
-- (pgfleet.owner_quotas), and a priority ceiling per role (the setting
-- max_priority and pgfleet.role_limits, sql/010_settings.sql). Enforced by
-- pgfleet.assign_jobs (sql/013_scheduling.sql) and skipped ahead of time by
-- the formation pass (core/placement/limits.h); docs/limits.md.

alter table pgfleet.formations add column max_running integer
  constraint "max_running must be between 1 and 100000"
    check (max_running between 1 and 100000);
comment on column pgfleet.formations.max_running is
  'Most of the formation''s jobs assigned or running at once (a concurrency limit); null: unlimited. Pending jobs beyond it wait, with the reason in jobs.error.';

-- What an operator lets one owner hold across all formations: the sums of
-- cpu and memory and the count of its assigned and running jobs. A null
-- column does not limit. The usage is counted from the jobs themselves under
-- this row's lock (pgfleet.assign_jobs), never kept as a counter that could
-- drift: nothing is written when a job exits.
create table pgfleet.owner_quotas (
  owner text primary key,
  max_cpu integer
    constraint "max_cpu must be between 1 and 2000000000 millicores"
      check (max_cpu between 1 and 2000000000),
  max_memory integer
    constraint "max_memory must be between 1 and 2000000000 MiB"
      check (max_memory between 1 and 2000000000),
  max_running integer
    constraint "max_running must be between 1 and 10000000"
      check (max_running between 1 and 10000000),
  updated_at timestamptz not null default now()
);
comment on table pgfleet.owner_quotas is
  'Per-owner quotas, written by operators: what one owner''s assigned and running jobs may take in all (cpu, memory, count). Pending jobs beyond it wait, with the reason in jobs.error. Owners without a row are not limited (and pay nothing). Usage: pgfleet.owner_quota_status.';
comment on column pgfleet.owner_quotas.owner is 'The role owning the jobs (jobs.owner); it must exist.';
comment on column pgfleet.owner_quotas.max_cpu is 'Most millicores of cpu the owner''s assigned and running jobs may ask for in all; null: no limit.';
comment on column pgfleet.owner_quotas.max_memory is 'Most MiB of memory the owner''s assigned and running jobs may ask for in all; null: no limit.';
comment on column pgfleet.owner_quotas.max_running is 'Most of the owner''s jobs assigned or running at once; null: no limit.';
comment on column pgfleet.owner_quotas.updated_at is 'When the row was last written.';

-- The priority ceiling (setting max_priority) may be set per role too.
comment on table pgfleet.role_limits is
  'Per-role job ceilings: for jobs owned by role, setting name (max_pids, max_stop_grace_seconds, max_disk_mib, max_log_mib, max_priority) is value instead of pgfleet.settings''. Written by operators.';
comment on column pgfleet.role_limits.name is 'A job ceiling: max_pids, max_stop_grace_seconds, max_disk_mib, max_log_mib or max_priority (pgfleet.job_ceiling_names()).';
