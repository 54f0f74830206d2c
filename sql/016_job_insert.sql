-- A job's way in: the rules an inserted job row must meet and the trigger
-- that applies them, creates unknown formations, records 'created' events
-- and wakes sleeping schedulers. Re-created on every `pgfleet migrate`. (The
-- other triggers on jobs, formations and hosts: 020_triggers.sql.)

-- The rules a job row must meet at insert, beyond the columns' own: each a
-- SQL function, so that the trigger below applies the same ones whether it
-- checks one row in PL/pgSQL expressions or many rows in one statement (the
-- planner inlines them either way).

-- Who may insert what (docs/security.md). A job is its submitter's: only
-- admins and schedulers (replicas take their formation's owner) may name
-- another owner or mark a job privileged without being in
-- pgfleet_privileged. The rule job n breaks for p_caller ('owner' or
-- 'privileged'), or null; who the caller is gets asked only of a row that
-- names another owner or is privileged.
create or replace function pgfleet.submitter_rule_broken(n pgfleet.jobs, p_caller text) returns text
language sql stable as $$
  select case
    when not (n.owner <> p_caller
              or (n.privileged and not pg_has_role(p_caller, 'pgfleet_privileged', 'member'))) then null
    when pgfleet.is_admin(p_caller) or pg_has_role(p_caller, 'pgfleet_scheduler', 'member') then null
    when n.owner <> p_caller then 'owner'
    else 'privileged'
  end
$$;
comment on function pgfleet.submitter_rule_broken(pgfleet.jobs, text) is
  'The rule of who may insert what that job row n breaks when p_caller inserts it: ''owner'' (another owner named) or ''privileged'' (marked privileged by one not in pgfleet_privileged); null for admins, schedulers and rows that break neither.';

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
    -- (a row with after: its error is jobs_link_dependencies', whatever was inserted)
    when n.error is not null and n.after is null then 'error'
    when n.output_tail is not null then 'output_tail'
    when n.peak_memory_bytes is not null then 'peak_memory_bytes'
    when n.cpu_seconds is not null then 'cpu_seconds'
    when n.assigned_at is not null then 'assigned_at'
    when n.started_at is not null then 'started_at'
    when n.finished_at is not null then 'finished_at'
    when n.requeue_on_stop then 'requeue_on_stop'
    when n.stop_force then 'stop_force'
    when n.health <> 'unknown' then 'health'
    when n.health_at is not null then 'health_at'
    when n.health_output is not null then 'health_output'
    when n.host_ports is not null then 'host_ports'
    when n.address is not null then 'address'
    when n.preempted_by is not null then 'preempted_by'
    when n.preempting is not null then 'preempting'
  end
$$;
comment on function pgfleet.owned_column_set(pgfleet.jobs) is
  'The first column pgfleet owns (state, attempts, host, outcome, health, timestamps) that job row n sets to other than its default, or null: refused at insert.';

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
      or (n.run_as <> '' and n.run_as !~ '^([A-Za-z_][A-Za-z0-9._-]{0,31}|[0-9]{1,9}(:[0-9]{1,9})?)$')
$$;
comment on function pgfleet.spec_may_break_rules(pgfleet.jobs) is
  'False when job row n surely meets pgfleet.spec_problem''s rules (no bad env name, every field far from its size limit, run_as empty, a name or ids of at most 9 digits); true when the exact check must run.';

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

-- The first insert rule job row n breaks when p_caller inserts it, as
-- pgfleet.refuse_job_insert's rule and arguments ({rule, a, b}), or null.
-- The checks of a statement of one row, in the order jobs_after_insert
-- checks many, each in a PL/pgSQL expression and asked only when the one
-- before holds. PL/pgSQL, called as an expression: no statement. (As a SQL
-- function of one CASE, inlined into the trigger, it ran spec_problem and
-- privilege_problem for every row whatever its guards, as pg_stat_statements
-- showed: the planner evaluates immutable functions of the row's values.)
create or replace function pgfleet.job_insert_refusal(n pgfleet.jobs, p_caller text)
returns text[]
language plpgsql stable as $$
declare
  v_rule text;
  v_problem text[];
begin
  v_rule := pgfleet.submitter_rule_broken(n, p_caller);
  if v_rule is not null then
    return array[v_rule, p_caller, n.owner];
  end if;
  -- Privileged features (user root, network host, a rootfs path) only in
  -- privileged jobs: hosts refuse them otherwise, so they are refused here.
  if not n.privileged then
    v_problem := pgfleet.privilege_problem(n.run_as, n.network, n.rootfs, n.seccomp, n.ports);
    if v_problem is not null then
      return array['privilege'] || v_problem;
    end if;
  end if;
  v_rule := pgfleet.owned_column_set(n);
  if v_rule is not null then
    return array['owned', v_rule];
  end if;
  -- A replica's formation version is the schedulers' to write (a row that
  -- claimed the current version would count as an updated replica), and so
  -- is a cron job's due time (a row that claimed one would take its run).
  if (n.version is not null or n.due_at is not null)
     and not (pgfleet.is_admin(p_caller) or pg_has_role(p_caller, 'pgfleet_scheduler', 'member')) then
    return array['owned', case when n.version is not null then 'version' else 'due_at' end];
  end if;
  -- What hostd would refuse (env names, sizes) is refused here, so one job
  -- can never make a host's dispatch batch fail.
  if pgfleet.spec_may_break_rules(n) then
    v_problem := pgfleet.spec_problem(n.command, n.env, n.constraints, n.rootfs, n.run_as);
    if v_problem is not null then
      return array['spec'] || v_problem;
    end if;
  end if;
  -- The operator's ceilings (replicas a scheduler inserts were checked as
  -- their formation's template).
  if n.pids_max > 1024 or n.stop_grace_seconds > 10 or n.disk > 0
     or n.log_max_files is not null or n.log_max_file_mb is not null then
    v_problem := pgfleet.limit_problem(n.owner, n.pids_max, n.stop_grace_seconds, n.disk,
                                       n.log_max_files, n.log_max_file_mb);
    if v_problem is not null and not pgfleet.has_role(p_caller, 'pgfleet_scheduler') then
      return array['spec'] || v_problem;
    end if;
  end if;
  if n.priority > 50 and not pgfleet.has_role(p_caller, 'pgfleet_scheduler') then
    v_problem := pgfleet.priority_problem(n.owner, n.priority);
    if v_problem is not null then
      return array['spec'] || v_problem;
    end if;
  end if;
  return null;
end $$;
comment on function pgfleet.job_insert_refusal(pgfleet.jobs, text) is
  'The first insert rule job row n breaks when p_caller inserts it (who may insert what, privileged features, columns pgfleet owns, hostd''s spec rules, the job ceilings), as {rule, a, b} for pgfleet.refuse_job_insert; null when none. Used by jobs_after_insert for a statement of one row.';
revoke execute on function pgfleet.job_insert_refusal(pgfleet.jobs, text) from public;

-- After each INSERT statement: check the rows (who may insert what, the
-- columns pgfleet owns, hostd's spec rules, no deleted formation), create
-- unknown formations (as batch formations), record a 'created' event per
-- job, and wake sleeping schedulers once per distinct formation in the
-- statement (pgfleet.wake_schedulers: a NOTIFY only when some scheduler
-- sleeps, never once per row: NOTIFY serializes commits).
-- A statement of one row (a submitter's INSERT, the common case) is checked
-- in one expression on that row (pgfleet.job_insert_refusal): three
-- statements in all (the row, its formation, its event; docs/decisions/0011). Many
-- rows are checked a statement per rule, set-based. Both use the same rules,
-- in the same order. The steps of many rows stay in this function: only the
-- trigger's own statements can read its transition table (new_jobs).
-- jobs.formation's foreign key is deferred so this statement trigger runs first.
create or replace function pgfleet.jobs_after_insert() returns trigger
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  n pgfleet.jobs;
  v_row pgfleet.jobs;
  v_rows integer := 0;
  v_bad record;
  v_problem text[];
  v_formation integer;
  v_deleted_at timestamptz;
  v_deleted_job bigint;
  v_deleted_formation text;
  v_caller text := pgfleet.caller();
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
    v_problem := pgfleet.job_insert_refusal(n, v_caller);
    if v_problem is not null then
      perform pgfleet.refuse_job_insert(v_problem[1], n.id, v_problem[2], v_problem[3]);
    end if;
    select f.id, f.deleted_at into v_formation, v_deleted_at from pgfleet.formations f where f.name = n.formation;
    if v_deleted_at is not null then
      perform pgfleet.refuse_job_insert('deleted', n.id, n.formation);
    end if;
    if v_formation is null then  -- unknown: a batch formation of that name, the submitter's
      -- (Owner and network named: their defaults are current_user's, and this
      -- function runs as the schema's owner.)
      insert into pgfleet.formations (name, owner, network)
      values (n.formation, v_caller, pgfleet.default_network())
      on conflict (name) do nothing;
    end if;
    insert into pgfleet.job_events (job_id, attempt, kind) values (n.id, 0, 'created');
    if pgfleet.schedulers_sleep() then
      perform pgfleet.notify_schedulers(array(
        select f.id::text from pgfleet.formations f where f.name = n.formation));
    end if;
    return null;
  end if;

  -- Many rows: a statement per rule, each naming the first row that breaks it.
  select j.id, r.rule, j.owner into v_bad from new_jobs j
   cross join lateral (select pgfleet.submitter_rule_broken(j, v_caller) as rule) r
   where r.rule is not null
   limit 1;
  if found then
    perform pgfleet.refuse_job_insert(v_bad.rule, v_bad.id, v_caller, v_bad.owner);
  end if;
  select j.id, p.problem into v_bad from new_jobs j
   cross join lateral (select pgfleet.privilege_problem(j.run_as, j.network, j.rootfs, j.seccomp, j.ports) as problem) p
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
  if not (pgfleet.is_admin(v_caller) or pg_has_role(v_caller, 'pgfleet_scheduler', 'member')) then
    select j.id, case when j.version is not null then 'version' else 'due_at' end as col
      into v_bad from new_jobs j where j.version is not null or j.due_at is not null limit 1;
    if found then
      perform pgfleet.refuse_job_insert('owned', v_bad.id, v_bad.col);
    end if;
  end if;
  select j.id, p.problem into v_bad from new_jobs j
   cross join lateral (select pgfleet.spec_problem(j.command, j.env, j.constraints, j.rootfs, j.run_as) as problem) p
   where pgfleet.spec_may_break_rules(j) and p.problem is not null
   limit 1;
  if found then
    perform pgfleet.refuse_job_insert('spec', v_bad.id, v_bad.problem[1], v_bad.problem[2]);
  end if;
  -- (Replicas a scheduler inserts were checked as their formation's template.)
  if not pgfleet.has_role(v_caller, 'pgfleet_scheduler') then
    select j.id, p.problem into v_bad from new_jobs j
     cross join lateral (select pgfleet.limit_problem(j.owner, j.pids_max, j.stop_grace_seconds, j.disk,
                                                      j.log_max_files, j.log_max_file_mb) as problem) p
     where (j.pids_max > 1024 or j.stop_grace_seconds > 10 or j.disk > 0
            or j.log_max_files is not null or j.log_max_file_mb is not null)
       and p.problem is not null
     limit 1;
    if found then
      perform pgfleet.refuse_job_insert('spec', v_bad.id, v_bad.problem[1], v_bad.problem[2]);
    end if;
    select j.id, p.problem into v_bad from new_jobs j
     cross join lateral (select pgfleet.priority_problem(j.owner, j.priority) as problem) p
     where j.priority > 50 and p.problem is not null
     limit 1;
    if found then
      perform pgfleet.refuse_job_insert('spec', v_bad.id, v_bad.problem[1], v_bad.problem[2]);
    end if;
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
    insert into pgfleet.formations (name, owner, network)
    select distinct j.formation, v_caller, pgfleet.default_network() from new_jobs j
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
  'Statement-level AFTER INSERT on jobs: refuses rows that break the insert rules (pgfleet.submitter_rule_broken, pgfleet.privilege_problem, pgfleet.owned_column_set, pgfleet.spec_problem, deleted formations), creates unknown formations, writes created events, wakes sleeping schedulers once per formation (pgfleet.wake_schedulers). One row is checked in PL/pgSQL expressions, many a statement per rule.';

drop trigger if exists jobs_after_insert on pgfleet.jobs;
create trigger jobs_after_insert
  after insert on pgfleet.jobs
  referencing new table as new_jobs
  for each statement execute function pgfleet.jobs_after_insert();
