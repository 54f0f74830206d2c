-- Triggers re-created on every `pgfleet migrate` (the insert trigger on jobs,
-- with the rules it applies: 016_job_insert.sql).

-- Only legal state transitions can be written, by pgfleet or by hand. The
-- rule is the trigger's WHEN condition, evaluated in the executor for every
-- changed row; the function runs only for an illegal one, to raise
-- (docs/decisions/0006).
create or replace function pgfleet.jobs_check_transition() returns trigger
language plpgsql as $$
begin
  raise exception 'illegal state transition for job %: % -> %', old.id, old.state, new.state
    using errcode = 'check_violation', column = 'state';
end $$;
comment on function pgfleet.jobs_check_transition() is
  'Raises for a job state change outside pending -> assigned -> running -> succeeded|failed|cancelled (and back to pending); pending -> failed for a job with after whose dependency failed; assigned -> succeeded is a short job whose running and exit reports were applied together. Called only for such a change (the trigger''s WHEN condition holds the rule).';

drop trigger if exists jobs_check_transition on pgfleet.jobs;
create trigger jobs_check_transition
  before update of state on pgfleet.jobs
  for each row when (old.state is distinct from new.state and not (
       (old.state = 'pending' and new.state in ('assigned', 'cancelled'))
    -- a job waiting for others fails when one of them did (024_dependencies.sql)
    or (old.state = 'pending' and new.state = 'failed' and old.after is not null)
    or (old.state = 'assigned' and new.state in ('running', 'succeeded', 'pending', 'failed', 'cancelled'))
    or (old.state = 'running' and new.state in ('succeeded', 'failed', 'cancelled', 'pending'))))
  execute function pgfleet.jobs_check_transition();

-- A deleted job takes its events with it (what job_events' foreign key did
-- until migration 0014), once per DELETE statement, whoever deletes; TRUNCATE,
-- which fires no delete trigger, empties job_events.
create or replace function pgfleet.jobs_after_delete() returns trigger
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  if tg_op = 'TRUNCATE' then
    truncate pgfleet.job_events, pgfleet.job_ports, pgfleet.job_dependencies;
  else
    delete from pgfleet.job_events e using gone_jobs g where e.job_id = g.id;
    delete from pgfleet.job_ports p using gone_jobs g where p.job_id = g.id;
    -- jobs waiting for a deleted one fail; a deleted waiting job's edges go
    if exists (select 1 from pgfleet.job_dependencies) then
      perform pgfleet.settle_dependents_of(array(select g.id from gone_jobs g));
    end if;
  end if;
  return null;
end $$;
comment on function pgfleet.jobs_after_delete() is
  'Statement-level AFTER DELETE and AFTER TRUNCATE on jobs: deletes the deleted jobs'' events and held ports, or truncates job_events, job_ports and job_dependencies (none has a foreign key: migrations 0014, 0033, 0035); jobs waiting for a deleted job fail (pgfleet.settle_dependents).';
revoke execute on function pgfleet.jobs_after_delete() from public;

drop trigger if exists jobs_after_delete on pgfleet.jobs;
create trigger jobs_after_delete
  after delete on pgfleet.jobs
  referencing old table as gone_jobs
  for each statement execute function pgfleet.jobs_after_delete();
drop trigger if exists jobs_after_truncate on pgfleet.jobs;
create trigger jobs_after_truncate
  after truncate on pgfleet.jobs
  for each statement execute function pgfleet.jobs_after_delete();

-- Formation changes (scale, new service formation) wake the schedulers.
create or replace function pgfleet.formations_notify() returns trigger
language plpgsql as $$
begin
  perform pg_notify(pgfleet.work_channel(), n.id::text) from new_formations n where n.kind in ('service', 'system', 'sysbatch', 'cron');
  return null;
end $$;
comment on function pgfleet.formations_notify() is 'Notifies pgfleet_work when a service, system, sysbatch or cron formation is created or changed.';

drop trigger if exists formations_notify_insert on pgfleet.formations;
create trigger formations_notify_insert
  after insert on pgfleet.formations
  referencing new table as new_formations
  for each statement execute function pgfleet.formations_notify();
drop trigger if exists formations_notify_update on pgfleet.formations;
create trigger formations_notify_update
  after update on pgfleet.formations
  referencing new table as new_formations
  for each statement execute function pgfleet.formations_notify();

-- A formation's replicas are capped by the setting max_replicas (default
-- 10,000): a typo such as 2147483647 would otherwise have schedulers insert
-- replicas for hours and grow the database by gigabytes.
create or replace function pgfleet.formations_check_replicas() returns trigger
language plpgsql as $$
declare
  v_max integer := pgfleet.setting('max_replicas', '10000')::integer;
begin
  if new.replicas > v_max then
    raise exception 'replicas must be <= % (setting max_replicas; got %)', v_max, new.replicas
      using errcode = 'check_violation', column = 'replicas';
  end if;
  if new.deleted_at is not null and new.replicas > 0 then
    raise exception 'formation % was deleted: its replicas stay 0 (create it again to run it)', new.name
      using errcode = 'check_violation', column = 'replicas';
  end if;
  return new;
end $$;
comment on function pgfleet.formations_check_replicas() is
  'Refuses a formation whose replicas exceed the setting max_replicas (default 10000), or a deleted formation with replicas.';

drop trigger if exists formations_check_replicas on pgfleet.formations;
create trigger formations_check_replicas
  before insert or update of replicas on pgfleet.formations
  for each row execute function pgfleet.formations_check_replicas();

-- A formation's job template obeys the same spec rules as a job (its
-- replicas are jobs): refused when written, not when replicas are created.
create or replace function pgfleet.formations_check_template() returns trigger
language plpgsql as $$
declare
  v_problem text[];
begin
  v_problem := coalesce(pgfleet.spec_problem(coalesce(new.command, array['x']), new.env,
                                             new.constraints, new.rootfs, new.run_as),
                        pgfleet.limit_problem(new.owner, new.pids_max, new.stop_grace_seconds, new.disk,
                                              new.log_max_files, new.log_max_file_mb));
  if v_problem is not null then
    raise exception '%', v_problem[2]
      using errcode = 'check_violation', column = v_problem[1],
            detail = format('formation %s', new.name);
  end if;
  -- Replicas run what the template's last writer asked for: privileged
  -- features only if that writer was privileged (docs/security.md).
  if not pgfleet.is_admin(pgfleet.caller()) then
    if tg_op = 'INSERT' and new.owner <> pgfleet.caller() then
      raise exception 'owner must be the creating role % (got %)', pgfleet.caller(), new.owner
        using errcode = 'insufficient_privilege', column = 'owner';
    elsif tg_op = 'UPDATE' and new.owner <> old.owner then
      raise exception 'owner of formation % cannot be changed (only by an admin)', new.name
        using errcode = 'insufficient_privilege', column = 'owner';
    end if;
  end if;
  new.privileged := pgfleet.caller_privileged();
  -- A scheduler's auto-revert (pgfleet.fail_rollout) restores a version as
  -- its writer made it.
  if tg_op = 'UPDATE' and new.version <> old.version
     and pg_has_role(pgfleet.caller(), 'pgfleet_scheduler', 'member') then
    new.privileged := coalesce((select v.privileged from pgfleet.formation_versions v
                                 where v.formation_id = new.id and v.version = new.version), false);
  end if;
  v_problem := pgfleet.privilege_problem(new.run_as, new.network, new.rootfs, new.seccomp, new.ports);
  if v_problem is not null and not new.privileged then
    raise exception '%', v_problem[2]
      using errcode = 'insufficient_privilege', column = v_problem[1],
            detail = format('formation %s', new.name);
  end if;
  return new;
end $$;
comment on function pgfleet.formations_check_template() is
  'BEFORE INSERT OR UPDATE on formations: the job template must pass pgfleet.spec_problem and the ceilings of pgfleet.limit_problem.';

drop trigger if exists formations_check_template on pgfleet.formations;
create trigger formations_check_template
  before insert or update of command, env, constraints, rootfs, run_as, network, privileged, owner,
                             pids_max, stop_grace_seconds, disk, log_max_files, log_max_file_mb,
                             seccomp, ports
  on pgfleet.formations
  for each row execute function pgfleet.formations_check_template();

-- hosts.config_version (migration 0017): schedulers keep a host's labels, API
-- URL, driver and key between passes and read them again when it moves.
create or replace function pgfleet.hosts_config_changed() returns trigger
language plpgsql as $$
begin
  new.config_version := old.config_version + 1;
  return new;
end $$;
comment on function pgfleet.hosts_config_changed() is
  'BEFORE UPDATE OF labels, api_url, driver on hosts, when one of them changes: bumps config_version.';

drop trigger if exists hosts_config_changed on pgfleet.hosts;
create trigger hosts_config_changed
  before update of labels, api_url, driver on pgfleet.hosts
  for each row when (old.labels is distinct from new.labels or old.api_url is distinct from new.api_url
                     or old.driver is distinct from new.driver)
  execute function pgfleet.hosts_config_changed();

create or replace function pgfleet.host_keys_changed() returns trigger
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  update pgfleet.hosts set config_version = config_version + 1
   where id in (case when tg_op <> 'INSERT' then old.host_id end,
                case when tg_op <> 'DELETE' then new.host_id end);
  return null;
end $$;
comment on function pgfleet.host_keys_changed() is
  'AFTER INSERT, UPDATE or DELETE on host_keys: bumps the host''s config_version (schedulers sign dispatches with the key they keep).';

drop trigger if exists host_keys_changed on pgfleet.host_keys;
create trigger host_keys_changed
  after insert or update or delete on pgfleet.host_keys
  for each row execute function pgfleet.host_keys_changed();

-- Settings are checked when written (pgfleet.setting_rules): a typo such as
-- host_ttl_seconds = 'abc' made every scheduler pass fail, and -5 declared
-- every host lost.
create or replace function pgfleet.settings_check() returns trigger
language plpgsql as $$
declare
  v_problem text := pgfleet.setting_problem(new.name, new.value);
begin
  if v_problem is not null then
    raise exception '%', v_problem
      using errcode = 'check_violation', column = case when v_problem like 'setting name%' then 'name' else 'value' end;
  end if;
  new.value := btrim(new.value);
  return new;
end $$;
comment on function pgfleet.settings_check() is
  'Refuses a row of pgfleet.settings whose name is not a known setting or whose value breaks its rule (pgfleet.setting_rules), naming it.';

-- pgfleet.role_limits: a role that exists, a job ceiling, a value its
-- setting's rule allows.
create or replace function pgfleet.role_limits_check() returns trigger
language plpgsql as $$
declare
  v_problem text;
begin
  if not exists (select 1 from pg_roles r where r.rolname = new.role) then
    raise exception 'role % does not exist', new.role
      using errcode = 'check_violation', column = 'role';
  end if;
  if not new.name = any(pgfleet.job_ceiling_names()) then
    raise exception 'name must be one of % (got "%")',
                    array_to_string(pgfleet.job_ceiling_names(), ', '), left(new.name, 100)
      using errcode = 'check_violation', column = 'name';
  end if;
  v_problem := pgfleet.setting_problem(new.name, new.value);
  if v_problem is not null then
    raise exception '%', v_problem using errcode = 'check_violation', column = 'value';
  end if;
  new.value := btrim(new.value);
  return new;
end $$;
comment on function pgfleet.role_limits_check() is
  'Refuses a row of pgfleet.role_limits for a role that does not exist, a name that is not a job ceiling (pgfleet.job_ceiling_names) or a value its setting''s rule forbids, naming it.';

drop trigger if exists role_limits_check on pgfleet.role_limits;
create trigger role_limits_check
  before insert or update on pgfleet.role_limits
  for each row execute function pgfleet.role_limits_check();

drop trigger if exists settings_check on pgfleet.settings;
create trigger settings_check
  before insert or update on pgfleet.settings
  for each row execute function pgfleet.settings_check();
