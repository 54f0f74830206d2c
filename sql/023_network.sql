-- Networking (migration 0033): ports held while their attempt lives, the
-- address hostd reports, and telling watchers that endpoints changed.
-- The endpoints view itself is in 095_endpoints.sql (it reads visible_jobs).

-- The rules of the domain pgfleet.spec_ports (migration 0033) that need a
-- subquery, which a domain's CHECK cannot hold. The same as the migration's.
create or replace function pgfleet.ports_count(p_ports jsonb) returns integer
language sql immutable as $$ select count(*)::integer from jsonb_object_keys(p_ports) $$;
comment on function pgfleet.ports_count(jsonb) is 'How many names an object of ports has.';
create or replace function pgfleet.ports_repeat_a_number(p_ports jsonb) returns boolean
language sql immutable as $$
  select exists (select 1 from jsonb_each(p_ports) e
                  where jsonb_typeof(e.value) = 'number' and e.value <> '0'
                  group by e.value having count(*) > 1)
$$;
comment on function pgfleet.ports_repeat_a_number(jsonb) is
  'Whether an object of ports names one port number (other than 0) twice.';

-- An attempt that leaves assigned or running frees its ports, whatever
-- ends it (a report, host loss, a failed dispatch, a stop). The rule is
-- the trigger's WHEN, evaluated in the executor: jobs without ports pay
-- nothing more.
create or replace function pgfleet.jobs_release_ports() returns trigger
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  delete from pgfleet.job_ports p where p.job_id = old.id and p.attempt = old.attempt;
  return null;
end $$;
comment on function pgfleet.jobs_release_ports() is
  'AFTER UPDATE OF state on jobs, for an attempt with host ports that stops being assigned or running: deletes its rows of pgfleet.job_ports.';
revoke execute on function pgfleet.jobs_release_ports() from public;

drop trigger if exists jobs_release_ports on pgfleet.jobs;
create trigger jobs_release_ports
  after update of state on pgfleet.jobs
  for each row when (old.host_ports is not null and old.state in ('assigned', 'running')
                     and new.state not in ('assigned', 'running'))
  execute function pgfleet.jobs_release_ports();

-- An address as hostd reports it: null unless it is one (a bad report
-- must not make its whole batch fail).
create or replace function pgfleet.reported_address(p_text text) returns inet
language plpgsql immutable as $$
begin
  if p_text is null or p_text !~ '^[0-9a-fA-F.:]{2,45}$' then
    return null;
  end if;
  return host(p_text::inet)::inet;
exception when others then
  return null;
end $$;
comment on function pgfleet.reported_address(text) is
  'The address a running report names (its "address"), as inet; null when absent or not an IP address.';

create or replace function pgfleet.endpoints_channel() returns text
language sql immutable parallel safe as $$ select 'pgfleet_endpoints' $$;
comment on function pgfleet.endpoints_channel() is
  'The NOTIFY channel on which a formation''s name is sent when its endpoints change, while some session watches it (pgfleet.watch_endpoints).';

create or replace function pgfleet.watch_endpoints(p_formation text) returns void
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  -- Watchers whose session is gone.
  delete from pgfleet.endpoint_watchers w
   where not exists (select 1 from pg_stat_activity a where a.pid = w.pid);
  insert into pgfleet.endpoint_watchers (pid, formation)
  values (pg_backend_pid(), p_formation)
  on conflict do nothing;
end $$;
comment on function pgfleet.watch_endpoints(text) is
  'Registers this session as following the endpoints of formation p_formation (null: every formation): from now on each change NOTIFYs pgfleet.endpoints_channel() with the formation''s name, once per formation per transaction. LISTEN first, then watch, then read pgfleet.endpoints.';

create or replace function pgfleet.unwatch_endpoints() returns void
language sql security definer set search_path = pgfleet, pg_temp as $$
  delete from pgfleet.endpoint_watchers where pid = pg_backend_pid()
$$;
comment on function pgfleet.unwatch_endpoints() is 'This session follows no endpoints any more.';

-- One NOTIFY per formation per transaction (pg_notify folds equal ones),
-- and none while nobody watches (an index probe of an empty table).
create or replace function pgfleet.jobs_endpoints_changed() returns trigger
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  if exists (select 1 from pgfleet.endpoint_watchers w
              where w.formation is null or w.formation = new.formation) then
    perform pg_notify(pgfleet.endpoints_channel(), new.formation);
  end if;
  return null;
end $$;
comment on function pgfleet.jobs_endpoints_changed() is
  'AFTER UPDATE on jobs with ports or an address, when one starts or stops running or its health or address changes: NOTIFYs pgfleet.endpoints_channel() with its formation, if some session watches it.';
revoke execute on function pgfleet.jobs_endpoints_changed() from public;

drop trigger if exists jobs_endpoints_changed on pgfleet.jobs;
create trigger jobs_endpoints_changed
  after update of state, health, address on pgfleet.jobs
  for each row when ((old.host_ports is not null or new.host_ports is not null
                      or old.address is not null or new.address is not null)
                     and ((old.state = 'running') is distinct from (new.state = 'running')
                          or old.health is distinct from new.health
                          or old.address is distinct from new.address))
  execute function pgfleet.jobs_endpoints_changed();
