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
  update pgfleet.formations set replicas = 0, deleted_at = now(), updated_at = now()
   where id = v_id;
  return 'deleted; ' || v_stopped || ' live jobs stopped, history kept';
end $$;
comment on function pgfleet.delete_formation(text) is
  'Operator control: stops the formation''s live jobs (service replicas included) and deletes it. Its finished jobs and events stay (the row is kept, marked deleted_at, until retention prunes the last of them); it takes no new jobs until created again.';

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
