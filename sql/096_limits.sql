-- Limits (issue 38; docs/limits.md): the priority ceiling on formation
-- templates and on a job's priority raised later, the rules of
-- pgfleet.owner_quotas, what each owner holds of its quota, and the grants
-- (after 090_security.sql revoked every table's). pgfleet.assign_jobs
-- (sql/013_scheduling.sql) enforces max_running and the quotas; jobs are
-- checked against the ceiling at insert (sql/016_job_insert.sql).

-- A template's priority is its replicas': checked when written, as a job's
-- is at insert (pgfleet.priority_problem), for the formation's owner.
create or replace function pgfleet.formations_check_priority() returns trigger
language plpgsql as $$
declare
  v_problem text[];
begin
  v_problem := pgfleet.priority_problem(new.owner, new.priority);
  if v_problem is not null then
    raise exception '%', v_problem[2]
      using errcode = 'check_violation', column = v_problem[1],
            detail = format('formation %s', new.name);
  end if;
  return new;
end $$;
comment on function pgfleet.formations_check_priority() is
  'BEFORE INSERT OR UPDATE of priority or owner on formations: the template''s priority must be within its owner''s ceiling (pgfleet.priority_problem).';

drop trigger if exists formations_check_priority on pgfleet.formations;
create trigger formations_check_priority
  before insert or update of priority, owner on pgfleet.formations
  for each row when (new.priority > 50)
  execute function pgfleet.formations_check_priority();

-- A job's priority raised after its insert (only roles that may update jobs
-- can: schedulers and admins) is held to the same ceiling, but for the
-- schedulers' own writes.
create or replace function pgfleet.jobs_check_priority() returns trigger
language plpgsql as $$
declare
  v_problem text[];
begin
  if pgfleet.has_role(pgfleet.caller(), 'pgfleet_scheduler') then
    return new;
  end if;
  v_problem := pgfleet.priority_problem(new.owner, new.priority);
  if v_problem is not null then
    raise exception '%', v_problem[2]
      using errcode = 'check_violation', column = v_problem[1], detail = format('job %s', new.id);
  end if;
  return new;
end $$;
comment on function pgfleet.jobs_check_priority() is
  'BEFORE UPDATE of priority on jobs, when raised above 50: within the owner''s ceiling (pgfleet.priority_problem), unless a scheduler or an admin writes it.';

drop trigger if exists jobs_check_priority on pgfleet.jobs;
create trigger jobs_check_priority
  before update of priority on pgfleet.jobs
  for each row when (new.priority > old.priority and new.priority > 50)
  execute function pgfleet.jobs_check_priority();

-- pgfleet.owner_quotas: an owner that exists, at least one limit.
create or replace function pgfleet.owner_quotas_check() returns trigger
language plpgsql as $$
begin
  if not exists (select 1 from pg_roles r where r.rolname = new.owner) then
    raise exception 'owner must be an existing role (got "%")', left(new.owner, 100)
      using errcode = 'check_violation', column = 'owner';
  end if;
  if new.max_cpu is null and new.max_memory is null and new.max_running is null then
    raise exception 'a quota of owner % needs at least one of max_cpu, max_memory, max_running',
                    left(new.owner, 100)
      using errcode = 'check_violation', column = 'max_cpu';
  end if;
  new.updated_at := now();
  return new;
end $$;
comment on function pgfleet.owner_quotas_check() is
  'Refuses a row of pgfleet.owner_quotas for a role that does not exist or with no limit at all, naming it; stamps updated_at.';

drop trigger if exists owner_quotas_check on pgfleet.owner_quotas;
create trigger owner_quotas_check
  before insert or update on pgfleet.owner_quotas
  for each row execute function pgfleet.owner_quotas_check();

-- A quota raised or removed makes room: wake the schedulers.
create or replace function pgfleet.owner_quotas_changed() returns trigger
language plpgsql as $$
begin
  perform pgfleet.wake_schedulers(array[pgfleet.all_formations()]);
  return null;
end $$;
comment on function pgfleet.owner_quotas_changed() is
  'AFTER a statement on pgfleet.owner_quotas: wakes sleeping schedulers (room may have been made).';

drop trigger if exists owner_quotas_changed on pgfleet.owner_quotas;
create trigger owner_quotas_changed
  after insert or update or delete on pgfleet.owner_quotas
  for each statement execute function pgfleet.owner_quotas_changed();

-- What each owner with a quota holds of it now, counted from its live jobs
-- (as assign_jobs counts them). A submitter sees its own row.
drop view if exists pgfleet.owner_quota_status;
create view pgfleet.owner_quota_status with (security_barrier = true) as
select q.owner, q.max_cpu, u.cpu as cpu_in_use, q.max_memory, u.memory as memory_in_use,
       q.max_running, u.running,
       (select count(*) from pgfleet.jobs p
         where p.owner = q.owner and p.state = 'pending' and p.error like 'owner % at quota:%') as waiting
  from pgfleet.owner_quotas q
  cross join lateral pgfleet.owner_in_use(q.owner) u
 where q.owner = pgfleet.caller() or pgfleet.sees_every_job();
comment on view pgfleet.owner_quota_status is
  'Per owner with a quota (pgfleet.owner_quotas): its limits beside what its assigned and running jobs take now (cpu_in_use millicores, memory_in_use MiB, running) and how many pending jobs say they wait for it (waiting). A submitter sees its own row only.';

grant select on pgfleet.owner_quota_status
  to pgfleet_submitter, pgfleet_reader, pgfleet_scheduler, pgfleet_operator;
grant select, insert, update, delete on pgfleet.owner_quotas to pgfleet_operator;
grant select on pgfleet.owner_quotas to pgfleet_reader, pgfleet_scheduler;
-- assign_jobs locks the quotas of the owners it assigns to (for update).
grant update (updated_at) on pgfleet.owner_quotas to pgfleet_scheduler;

-- A formation's max_running raised or removed makes room for its pending
-- jobs (a batch formation's change wakes nobody otherwise).
create or replace function pgfleet.formations_max_running_changed() returns trigger
language plpgsql as $$
begin
  perform pgfleet.wake_schedulers(array[new.id::text]);
  return null;
end $$;
comment on function pgfleet.formations_max_running_changed() is
  'AFTER UPDATE of max_running on formations: wakes sleeping schedulers about the formation.';

drop trigger if exists formations_max_running_changed on pgfleet.formations;
create trigger formations_max_running_changed
  after update of max_running on pgfleet.formations
  for each row when (new.max_running is distinct from old.max_running)
  execute function pgfleet.formations_max_running_changed();
