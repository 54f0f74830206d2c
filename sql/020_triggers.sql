-- Triggers re-created on every `pgfleet migrate`.

-- The rules a job row must meet at insert, beyond the columns' own: each a
-- SQL function, so that the trigger below applies the same ones whether it
-- checks one row in PL/pgSQL expressions or many rows in one statement (the
-- planner inlines them either way).

-- Columns pgfleet owns (state, attempts, host, outcome, timestamps) take their
-- defaults at insert: a row that sets one could wedge a host or fake an
-- outcome. The first such column job n sets, or null.
create or replace function pgfleet.owned_column_set(n pgfleet.jobs) returns text
language sql immutable as $$
  select case
    when n.state <> 'pending' then 'state'
    when n.desired_state <> 'run' then 'desired_state'
    when n.attempt <> 0 then 'attempt'
    when n.failures <> 0 then 'failures'
    when n.host_losses <> 0 then 'host_losses'
    when n.host_id is not null then 'host_id'
    when n.pid is not null then 'pid'
    when n.exit_code is not null then 'exit_code'
    when n.signal is not null then 'signal'
    when n.oom_killed then 'oom_killed'
    when n.error is not null then 'error'
    when n.output_tail is not null then 'output_tail'
    when n.peak_memory_bytes is not null then 'peak_memory_bytes'
    when n.cpu_seconds is not null then 'cpu_seconds'
    when n.assigned_at is not null then 'assigned_at'
    when n.started_at is not null then 'started_at'
    when n.finished_at is not null then 'finished_at'
    when n.requeue_on_stop then 'requeue_on_stop'
  end
$$;
comment on function pgfleet.owned_column_set(pgfleet.jobs) is
  'The first column pgfleet owns (state, attempts, host, outcome, timestamps) that job row n sets to other than its default, or null: refused at insert.';

-- Whether job n may break a rule of pgfleet.spec_problem (a bad env name, or
-- a field near its size limit): the text form of a value is never shorter
-- than what the limits count, so only such rows pay for the exact check.
-- (Stable, not immutable, as the text form of an array is: an immutable
-- function with a stable body is not inlined, and a SQL function that is not
-- inlined is planned again in every transaction that calls it.)
create or replace function pgfleet.spec_may_break_rules(n pgfleet.jobs) returns boolean
language sql stable as $$
  select jsonb_path_exists(n.env, '$.keyvalue() ? (@.key == "" || @.key like_regex "=")')
      or cardinality(n.command) > pgfleet.max_command_args()
      or octet_length(n.command::text) > pgfleet.max_command_bytes()
      or octet_length(n.env::text) > pgfleet.max_env_bytes()
      or octet_length(n.constraints::text) > pgfleet.max_constraints_bytes()
      or octet_length(n.rootfs) > pgfleet.max_path_bytes()
      or octet_length(n.run_as) > pgfleet.max_path_bytes()
$$;
comment on function pgfleet.spec_may_break_rules(pgfleet.jobs) is
  'False when job row n surely meets pgfleet.spec_problem''s rules (no bad env name, every field far from its size limit); true when the exact check must run.';

-- Refuses an insert of job p_job for breaking rule p_rule, with the rule's
-- message and SQLSTATE, naming the column (the trigger below has two ways to
-- find a bad row, and one wording for each rule):
--   'owner'      p_a the caller, p_b the owner the row names
--   'privileged' the row is marked privileged by one who is not
--   'privilege'  p_a the field, p_b the message (pgfleet.privilege_problem)
--   'owned'      p_a the column pgfleet owns (pgfleet.owned_column_set)
--   'spec'       p_a the field, p_b the message (pgfleet.spec_problem)
--   'deleted'    p_a the deleted formation
create or replace function pgfleet.refuse_job_insert(p_rule text, p_job bigint,
                                                     p_a text default null, p_b text default null)
returns void
language plpgsql as $$
begin
  case p_rule
    when 'owner' then
      raise exception 'owner must be the submitting role % (job % sets %)', p_a, p_job, p_b
        using errcode = 'insufficient_privilege', column = 'owner';
    when 'privileged' then
      raise exception 'privileged is set by pgfleet: only members of pgfleet_privileged submit privileged jobs (job % sets it)', p_job
        using errcode = 'insufficient_privilege', column = 'privileged';
    when 'privilege' then
      raise exception '%', p_b
        using errcode = 'insufficient_privilege', column = p_a, detail = format('job %s', p_job);
    when 'owned' then
      raise exception 'jobs must be inserted as pending: % is set by pgfleet, not at insert (job % sets it)',
        p_a, p_job
        using errcode = 'check_violation', column = p_a;
    when 'spec' then
      raise exception '%', p_b
        using errcode = 'check_violation', column = p_a, detail = format('job %s', p_job);
    when 'deleted' then
      raise exception 'formation "%" was deleted: create it again (pgfleet formation create) to submit to it', p_a
        using errcode = 'check_violation', column = 'formation', detail = format('job %s', p_job);
  end case;
end $$;
comment on function pgfleet.refuse_job_insert(text, bigint, text, text) is
  'Raises the error of an insert rule (owner, privileged, privilege, owned, spec, deleted) that job p_job breaks, with its message, SQLSTATE and column (used by jobs_after_insert).';

-- After each INSERT statement: check the rows (who may insert what, the
-- columns pgfleet owns, hostd's spec rules, no deleted formation), create
-- unknown formations (as batch formations), record a 'created' event per
-- job, and wake sleeping schedulers once per distinct formation in the
-- statement (pgfleet.wake_schedulers: a NOTIFY only when some scheduler
-- sleeps, never once per row: NOTIFY serializes commits).
-- A statement of one row (a submitter's INSERT, the common case) is checked
-- in PL/pgSQL expressions on that row: three statements in all (the row, its
-- formation, its event), where a statement per rule cost more than the
-- checks themselves (docs/benchmarks.md). Many rows are checked a statement
-- per rule, set-based. Both use the same rules, in the same order.
-- jobs.formation's foreign key is deferred so this statement trigger runs first.
create or replace function pgfleet.jobs_after_insert() returns trigger
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  n pgfleet.jobs;
  v_row pgfleet.jobs;
  v_rows integer := 0;
  v_bad record;
  v_problem text[];
  v_column text;
  v_formation integer;
  v_deleted_at timestamptz;
  v_deleted_job bigint;
  v_deleted_formation text;
  v_caller text := pgfleet.caller();
  v_admin boolean;
  v_caller_privileged boolean;  -- pgfleet.caller_privileged(), with the admin check done once
begin
  -- The first row, and whether there is a second.
  for v_row in select * from new_jobs loop
    v_rows := v_rows + 1;
    exit when v_rows > 1;
    n := v_row;
  end loop;
  if v_rows = 0 then
    return null;
  end if;
  if v_rows = 1 then
    -- Who may insert what (docs/security.md). A job is its submitter's: only
    -- admins and schedulers (replicas take their formation's owner) may name
    -- another owner or mark a job privileged without being privileged. (Who
    -- the caller is, asked only of a row that needs it.)
    if (n.owner <> v_caller or (n.privileged and not pg_has_role(v_caller, 'pgfleet_privileged', 'member')))
       and not (pgfleet.is_admin(v_caller) or pg_has_role(v_caller, 'pgfleet_scheduler', 'member')) then
      perform pgfleet.refuse_job_insert(case when n.owner <> v_caller then 'owner' else 'privileged' end,
                                        n.id, v_caller, n.owner);
    end if;
    -- Privileged features (user root, network host, a rootfs path) only in
    -- privileged jobs: hosts refuse them otherwise, so they are refused here.
    if not n.privileged then
      v_problem := pgfleet.privilege_problem(n.run_as, n.network, n.rootfs);
      if v_problem is not null then
        perform pgfleet.refuse_job_insert('privilege', n.id, v_problem[1], v_problem[2]);
      end if;
    end if;
    v_column := pgfleet.owned_column_set(n);
    if v_column is not null then
      perform pgfleet.refuse_job_insert('owned', n.id, v_column);
    end if;
    -- What hostd would refuse (env names, sizes) is refused here, so one job
    -- can never make a host's dispatch batch fail.
    if pgfleet.spec_may_break_rules(n) then
      v_problem := pgfleet.spec_problem(n.command, n.env, n.constraints, n.rootfs, n.run_as);
      if v_problem is not null then
        perform pgfleet.refuse_job_insert('spec', n.id, v_problem[1], v_problem[2]);
      end if;
    end if;
    select f.id, f.deleted_at into v_formation, v_deleted_at from pgfleet.formations f where f.name = n.formation;
    if v_deleted_at is not null then
      perform pgfleet.refuse_job_insert('deleted', n.id, n.formation);
    end if;
    if v_formation is null then  -- unknown: a batch formation of that name
      insert into pgfleet.formations (name) values (n.formation) on conflict (name) do nothing;
    end if;
    insert into pgfleet.job_events (job_id, attempt, kind) values (n.id, 0, 'created');
    if pgfleet.schedulers_sleep() then
      perform pgfleet.notify_schedulers(array(
        select f.id::text from pgfleet.formations f where f.name = n.formation));
    end if;
    return null;
  end if;

  -- Many rows: a statement per rule, each naming the first row that breaks it.
  v_admin := pgfleet.is_admin(v_caller);
  if not (v_admin or pg_has_role(v_caller, 'pgfleet_scheduler', 'member')) then
    v_caller_privileged := v_admin or pg_has_role(v_caller, 'pgfleet_privileged', 'member');
    select j.id, case when j.owner <> v_caller then 'owner' else 'privileged' end as col, j.owner
      into v_bad from new_jobs j
     where j.owner <> v_caller or (j.privileged and not v_caller_privileged)
     limit 1;
    if found then
      perform pgfleet.refuse_job_insert(v_bad.col, v_bad.id, v_caller, v_bad.owner);
    end if;
  end if;
  select j.id, p.problem into v_bad from new_jobs j
   cross join lateral (select pgfleet.privilege_problem(j.run_as, j.network, j.rootfs) as problem) p
   where not j.privileged and p.problem is not null
   limit 1;
  if found then
    perform pgfleet.refuse_job_insert('privilege', v_bad.id, v_bad.problem[1], v_bad.problem[2]);
  end if;
  select j.id, c.col into v_bad from new_jobs j
   cross join lateral (select pgfleet.owned_column_set(j) as col) c
   where c.col is not null
   limit 1;
  if found then
    perform pgfleet.refuse_job_insert('owned', v_bad.id, v_bad.col);
  end if;
  select j.id, p.problem into v_bad from new_jobs j
   cross join lateral (select pgfleet.spec_problem(j.command, j.env, j.constraints, j.rootfs, j.run_as) as problem) p
   where pgfleet.spec_may_break_rules(j) and p.problem is not null
   limit 1;
  if found then
    perform pgfleet.refuse_job_insert('spec', v_bad.id, v_bad.problem[1], v_bad.problem[2]);
  end if;
  -- (Checked only when some formation is deleted: no scan of new_jobs otherwise.)
  if exists (select 1 from pgfleet.formations where deleted_at is not null) then
    select j.id, j.formation into v_deleted_job, v_deleted_formation from new_jobs j
      join pgfleet.formations f on f.name = j.formation
     where f.deleted_at is not null
     limit 1;
  end if;
  if v_deleted_job is not null then
    perform pgfleet.refuse_job_insert('deleted', v_deleted_job, v_deleted_formation);
  end if;
  -- (An INSERT only when a formation is unknown: setting one up costs more
  -- than asking.)
  if exists (select 1 from new_jobs j
              where not exists (select 1 from pgfleet.formations f where f.name = j.formation)) then
    insert into pgfleet.formations (name)
    select distinct j.formation from new_jobs j
     where not exists (select 1 from pgfleet.formations f where f.name = j.formation)
    on conflict (name) do nothing;
  end if;
  insert into pgfleet.job_events (job_id, attempt, kind)
  select j.id, 0, 'created' from new_jobs j;
  -- (pgfleet.wake_schedulers, with the formations looked up only when a
  -- scheduler sleeps.)
  if pgfleet.schedulers_sleep() then
    perform pgfleet.notify_schedulers(array(
      select f.id::text from pgfleet.formations f
       where f.name in (select distinct j.formation from new_jobs j)));
  end if;
  return null;
end $$;
comment on function pgfleet.jobs_after_insert() is
  'Statement-level AFTER INSERT on jobs: refuses rows that break the insert rules (owner and privilege, pgfleet.privilege_problem, pgfleet.owned_column_set, pgfleet.spec_problem, deleted formations), creates unknown formations, writes created events, wakes sleeping schedulers once per formation (pgfleet.wake_schedulers). One row is checked in PL/pgSQL expressions, many a statement per rule.';

drop trigger if exists jobs_after_insert on pgfleet.jobs;
create trigger jobs_after_insert
  after insert on pgfleet.jobs
  referencing new table as new_jobs
  for each statement execute function pgfleet.jobs_after_insert();

-- Only legal state transitions can be written, by pgfleet or by hand. The
-- rule is the trigger's WHEN condition, evaluated in the executor for every
-- changed row; the function runs only for an illegal one, to raise. (A
-- PL/pgSQL call for every state change, 2-3 per job, cost about 5 % of the
-- database's time per job: docs/benchmarks.md.)
create or replace function pgfleet.jobs_check_transition() returns trigger
language plpgsql as $$
begin
  raise exception 'illegal state transition for job %: % -> %', old.id, old.state, new.state
    using errcode = 'check_violation', column = 'state';
end $$;
comment on function pgfleet.jobs_check_transition() is
  'Raises for a job state change outside pending -> assigned -> running -> succeeded|failed|cancelled (and back to pending); assigned -> succeeded is a short job whose running and exit reports were applied together. Called only for such a change (the trigger''s WHEN condition holds the rule).';

drop trigger if exists jobs_check_transition on pgfleet.jobs;
create trigger jobs_check_transition
  before update of state on pgfleet.jobs
  for each row when (old.state is distinct from new.state and not (
       (old.state = 'pending' and new.state in ('assigned', 'cancelled'))
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
    truncate pgfleet.job_events;
  else
    delete from pgfleet.job_events e using gone_jobs g where e.job_id = g.id;
  end if;
  return null;
end $$;
comment on function pgfleet.jobs_after_delete() is
  'Statement-level AFTER DELETE and AFTER TRUNCATE on jobs: deletes the deleted jobs'' events, or truncates job_events (job_events has no foreign key: migration 0014).';
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
  perform pg_notify(pgfleet.work_channel(), n.id::text) from new_formations n where n.kind = 'service';
  return null;
end $$;
comment on function pgfleet.formations_notify() is 'Notifies pgfleet_work when a service formation is created or changed.';

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
  return new;
end $$;
comment on function pgfleet.formations_check_replicas() is
  'Refuses a formation whose replicas exceed the setting max_replicas (default 10000).';

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
  v_problem := pgfleet.spec_problem(coalesce(new.command, array['x']), new.env, new.constraints,
                                    new.rootfs, new.run_as);
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
  v_problem := pgfleet.privilege_problem(new.run_as, new.network, new.rootfs);
  if v_problem is not null and not new.privileged then
    raise exception '%', v_problem[2]
      using errcode = 'insufficient_privilege', column = v_problem[1],
            detail = format('formation %s', new.name);
  end if;
  return new;
end $$;
comment on function pgfleet.formations_check_template() is
  'BEFORE INSERT OR UPDATE on formations: the job template must pass pgfleet.spec_problem.';

drop trigger if exists formations_check_template on pgfleet.formations;
create trigger formations_check_template
  before insert or update of command, env, constraints, rootfs, run_as, network, privileged, owner
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
