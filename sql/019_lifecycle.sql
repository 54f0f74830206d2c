-- Retiring what the cluster no longer uses: formations and hosts.

create or replace function pgfleet.delete_formation(p_name text) returns text
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_id integer;
  v_stopped integer;
begin
  perform pgfleet.require_role('pgfleet_operator', 'deleting a formation');
  select id into v_id from pgfleet.formations
   where name = p_name and deleted_at is null
     for update;
  if v_id is null then
    raise exception 'no formation named %', p_name using errcode = 'no_data_found';
  end if;
  if p_name = 'default' then
    raise exception 'the default formation cannot be deleted (jobs submitted without one go there)'
      using errcode = 'check_violation';
  end if;
  -- Its replicas and other live jobs are stopped; their rows and events stay.
  select pgfleet.stop_jobs(array(select j.id from pgfleet.jobs j
                                  where j.formation = p_name
                                    and j.state in ('pending', 'assigned', 'running')),
                           'formation ' || p_name || ' deleted')
    into v_stopped;
  if not exists (select 1 from pgfleet.jobs j where j.formation = p_name) then
    delete from pgfleet.formations where id = v_id;
    return 'deleted';
  end if;
  -- No replicas, so no disruption budget either (min_available <= replicas).
  update pgfleet.formations set replicas = 0, min_available = null, deleted_at = now(),
                                updated_at = now()
   where id = v_id;
  return 'deleted; ' || v_stopped || ' live jobs stopped, history kept';
end $$;
comment on function pgfleet.delete_formation(text) is
  'Operator control: stops the formation''s live jobs (service replicas included) and deletes it. Its finished jobs and events stay (the row is kept, marked deleted_at, until retention prunes the last of them); it takes no new jobs until created again.';

-- A plain INSERT of a formation whose name a deleted formation still holds
-- (its row kept for its jobs' history) creates it anew, as `pgfleet formation
-- create` does: the deleted row goes (its versions with it) and the new one
-- takes its name and id (what schedulers lock it by and its logs name). The
-- jobs' history stays under the name: their foreign key on it is checked at
-- commit, when the new row holds it. A live formation's name is still
-- refused by the unique name.
create or replace function pgfleet.formations_reuse_deleted_name() returns trigger
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_id integer;
begin
  delete from pgfleet.formations f where f.name = new.name and f.deleted_at is not null
  returning f.id into v_id;
  if v_id is not null then new.id := v_id; end if;
  return new;
end $$;
comment on function pgfleet.formations_reuse_deleted_name() is
  'BEFORE INSERT on formations: removes the row of a deleted formation of the same name (kept for its jobs'' history), so that inserting the name creates the formation anew with the same id; the jobs keep the name.';
drop trigger if exists formations_reuse_deleted_name on pgfleet.formations;
create trigger formations_reuse_deleted_name
  before insert on pgfleet.formations
  for each row execute function pgfleet.formations_reuse_deleted_name();

-- A sysbatch formation is done when its owner (or an operator) says so:
-- hosts that join from then on get no job of it; the jobs it has made run
-- to completion. Marking it done again changes nothing and answers when it
-- was first marked.
create or replace function pgfleet.formation_done(p_name text) returns timestamptz
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  f pgfleet.formations;
begin
  -- The formation's scheduling lock first (as a pass takes it, before any
  -- row): a pass under way ends first, and every later one sees done_at, so
  -- no job is made after this commits.
  perform pg_advisory_xact_lock(pgfleet.lock_class(), id)
     from pgfleet.formations where name = p_name and deleted_at is null;
  select * into f from pgfleet.formations where name = p_name and deleted_at is null for update;
  if not found then
    raise exception 'no formation named %', p_name using errcode = 'no_data_found';
  end if;
  if f.owner <> pgfleet.caller() and not pgfleet.has_role(pgfleet.caller(), 'pgfleet_operator') then
    raise exception 'formation % is owned by %: only its owner or a pgfleet_operator may mark it done (% is neither)',
      p_name, f.owner, pgfleet.caller() using errcode = 'insufficient_privilege';
  end if;
  if f.kind <> 'sysbatch' then
    raise exception 'formation % is a % formation: only a sysbatch formation can be marked done', p_name, f.kind
      using errcode = 'wrong_object_type', column = 'kind';
  end if;
  if f.done_at is null then
    update pgfleet.formations set done_at = now(), updated_at = now() where id = f.id
    returning done_at into f.done_at;
  end if;
  return f.done_at;
end $$;
comment on function pgfleet.formation_done(text) is
  'Marks sysbatch formation p_name done (formations.done_at): hosts that join or become eligible from now on get no job of it; the jobs it already made run to completion. Only its owner or a pgfleet_operator may; refused for another kind of formation. Returns when it was marked done (the first time, if it already was).';

create or replace function pgfleet.remove_host(p_host text) returns void
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_state text;
  v_live integer;
begin
  perform pgfleet.require_role('pgfleet_operator', 'removing a host');
  select state into v_state from pgfleet.hosts where id = p_host for update;
  if v_state is null then
    raise exception 'host % does not exist', p_host using errcode = 'no_data_found';
  end if;
  if v_state not in ('lost', 'offline') then
    raise exception 'host % is %: only a lost or offline host can be removed (pgfleet host offline % first)',
      p_host, v_state, p_host using errcode = 'object_in_use';
  end if;
  select count(*) into v_live from pgfleet.jobs
   where host_id = p_host and state in ('assigned', 'running');
  if v_live > 0 then
    raise exception 'host % still has % live jobs: stop them or wait for them to end', p_host, v_live
      using errcode = 'object_in_use';
  end if;
  -- Its heartbeat row goes with it; jobs and events keep its id as history;
  -- its login binding (pgfleet.host_logins) is the operator's and stays.
  delete from pgfleet.hosts where id = p_host;
end $$;
comment on function pgfleet.remove_host(text) is
  'Operator control: forgets a lost or offline host with no live jobs (its heartbeat goes; jobs and events keep its id; pgfleet.host_logins is left as the operator made it). A hostd started again with that id registers afresh.';

create or replace function pgfleet.prune_deleted_formations() returns integer
language sql as $$
  with gone as (
    delete from pgfleet.formations f
     where f.deleted_at is not null
       and not exists (select 1 from pgfleet.jobs j where j.formation = f.name)
    returning 1
  )
  select count(*)::integer from gone
$$;
comment on function pgfleet.prune_deleted_formations() is
  'Deletes the rows of deleted formations whose last job retention has pruned. Returns how many.';
