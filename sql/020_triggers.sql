-- Triggers re-created on every `pgfleet migrate`.

-- After each INSERT statement: create unknown formations (as batch formations),
-- record a 'created' event per job, and NOTIFY pgfleet_work once per distinct
-- formation in the statement (never once per row: NOTIFY serializes commits).
-- jobs.formation's foreign key is deferred so this statement trigger runs first.
create or replace function pgfleet.jobs_after_insert() returns trigger
language plpgsql as $$
declare
  v_bad record;
begin
  select n.id, n.state, n.attempt, n.host_id into v_bad from new_jobs n
   where n.state <> 'pending' or n.attempt <> 0 or n.host_id is not null
   limit 1;
  if found then
    raise exception 'jobs must be inserted as pending with attempt 0 and no host_id (job % has state %, attempt %, host_id %)',
      v_bad.id, v_bad.state, v_bad.attempt, coalesce(v_bad.host_id, 'null')
      using errcode = 'check_violation', column = 'state';
  end if;
  insert into pgfleet.formations (name)
  select distinct n.formation from new_jobs n
   where not exists (select 1 from pgfleet.formations f where f.name = n.formation)
  on conflict (name) do nothing;
  insert into pgfleet.job_events (job_id, attempt, kind)
  select n.id, 0, 'created' from new_jobs n;
  perform pg_notify(pgfleet.work_channel(), f.id::text)
     from pgfleet.formations f
    where f.name in (select distinct n.formation from new_jobs n);
  return null;
end $$;
comment on function pgfleet.jobs_after_insert() is
  'Statement-level AFTER INSERT on jobs: creates unknown formations, writes created events, notifies pgfleet_work once per formation.';

drop trigger if exists jobs_after_insert on pgfleet.jobs;
create trigger jobs_after_insert
  after insert on pgfleet.jobs
  referencing new table as new_jobs
  for each statement execute function pgfleet.jobs_after_insert();

-- Only legal state transitions can be written, by pgfleet or by hand.
create or replace function pgfleet.jobs_check_transition() returns trigger
language plpgsql as $$
begin
  if not ((old.state = 'pending' and new.state in ('assigned', 'cancelled'))
       or (old.state = 'assigned' and new.state in ('running', 'pending', 'failed', 'cancelled'))
       or (old.state = 'running' and new.state in ('succeeded', 'failed', 'cancelled', 'pending'))) then
    raise exception 'illegal state transition for job %: % -> %', old.id, old.state, new.state
      using errcode = 'check_violation', column = 'state';
  end if;
  return new;
end $$;
comment on function pgfleet.jobs_check_transition() is
  'Rejects job state changes outside pending -> assigned -> running -> succeeded|failed|cancelled (and back to pending).';

drop trigger if exists jobs_check_transition on pgfleet.jobs;
create trigger jobs_check_transition
  before update of state on pgfleet.jobs
  for each row when (old.state is distinct from new.state)
  execute function pgfleet.jobs_check_transition();

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
