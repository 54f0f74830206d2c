-- Formation versions and rollouts (migration 0032). A change of a template
-- column makes a new version and starts a rollout; the formation's
-- scheduler pass (schedulerd/rollout.cpp, with the pure
-- placement::ReconcileRollout) carries it out under the formation's lock
-- and ends it here (pgfleet.finish_rollout, pgfleet.fail_rollout).

create or replace function pgfleet.formation_template(f pgfleet.formations) returns jsonb
language sql stable as $$
  select coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
    from jsonb_each(to_jsonb(f)) e
   where e.key = any (pgfleet.template_columns())
$$;
comment on function pgfleet.formation_template(pgfleet.formations) is
  'Formation f''s job template as one object: its pgfleet.template_columns() and their values (what pgfleet.formation_versions.template holds).';

-- Resolved against the replicas it applies to: '25%' of 4 is 1, of 5 is 2.
create or replace function pgfleet.max_parallel_count(p_max_parallel text, p_replicas integer)
returns integer
language sql immutable as $$
  select greatest(1, case when right(p_max_parallel, 1) = '%'
                          then ceil(greatest(p_replicas, 0) * rtrim(p_max_parallel, '%')::numeric / 100)::integer
                          else p_max_parallel::integer end)
$$;
comment on function pgfleet.max_parallel_count(text, integer) is
  'How many replicas a rollout replaces at a time: formations.max_parallel as a count, or as a percentage of p_replicas rounded up; at least 1.';

-- A replica is healthy from its passing health check, or, with no check,
-- from the start of its attempt; null while it is not (not running, being
-- stopped, unknown or unhealthy).
create or replace function pgfleet.replica_healthy_since(j pgfleet.jobs) returns timestamptz
language sql stable as $$
  select case when j.state <> 'running' or j.desired_state <> 'run' then null
              when j.health_check is null then j.started_at
              when j.health = 'healthy' then j.health_at end
$$;
comment on function pgfleet.replica_healthy_since(pgfleet.jobs) is
  'Since when replica j has been healthy: its health_at while health is healthy, or its started_at when it has no health_check; null unless it is running and wanted.';

-- Whether every live replica of formation f runs version p_version healthy
-- (and, for a service, as many as it keeps).
create or replace function pgfleet.version_healthy_now(f pgfleet.formations, p_version integer)
returns boolean
language sql stable as $$
  select count(*) > 0
     and count(*) >= case when f.kind = 'service' then f.replicas else 1 end
     and bool_and(j.version = p_version and pgfleet.replica_healthy_since(j) is not null)
    from pgfleet.jobs j
   where j.formation = f.name and j.state in ('pending', 'assigned', 'running')
     and j.desired_state = 'run'
$$;
comment on function pgfleet.version_healthy_now(pgfleet.formations, integer) is
  'True when formation f has live replicas, as many as it keeps (a service), all of version p_version and healthy.';

-- BEFORE INSERT OR UPDATE on formations. A new formation is version 1. A
-- change of its template makes the next version and starts its rollout; a
-- change of version alone is a revert (pgfleet.revert), whose template
-- must be that version's. Security definer: it writes formation_versions
-- and rollouts, which no operator may write directly.
create or replace function pgfleet.formations_version() returns trigger
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_old jsonb;
  v_new jsonb;
  v_target jsonb;
  v_revert boolean := false;
  v_canary integer;
begin
  if tg_op = 'INSERT' then
    new.version := 1;
    return new;
  end if;
  v_new := pgfleet.formation_template(new);
  if new.version is distinct from old.version then
    select v.template into v_target from pgfleet.formation_versions v
     where v.formation_id = new.id and v.version = new.version;
    if v_target is null then
      raise exception 'formation % has no version % (pgfleet.formation_versions)', new.name, new.version
        using errcode = 'check_violation', column = 'version';
    end if;
    if not (v_new @> v_target) then
      raise exception 'version of formation % changes only with its template: pgfleet.revert(formation, version) sets both (got version % with another template)',
                      new.name, new.version
        using errcode = 'check_violation', column = 'version';
    end if;
    v_revert := true;
  else
    v_old := pgfleet.formation_template(old);
    if v_new = v_old then
      return new;
    end if;
    new.version := coalesce((select max(v.version) from pgfleet.formation_versions v
                              where v.formation_id = new.id), old.version) + 1;
    insert into pgfleet.formation_versions (formation_id, version, template, privileged, created_by, changed)
    values (new.id, new.version, v_new, new.privileged, pgfleet.caller(),
            array(select c from unnest(pgfleet.template_columns()) c
                   where v_new -> c is distinct from v_old -> c order by c));
  end if;
  new.updated_at := now();
  if new.kind not in ('service', 'system') then
    return new;
  end if;
  -- The version in force is worth reverting to if it runs healthy now.
  if pgfleet.version_healthy_now(old, old.version) then
    update pgfleet.formation_versions v set healthy_at = now()
     where v.formation_id = new.id and v.version = old.version;
  end if;
  update pgfleet.rollouts r set state = 'superseded', finished_at = now(),
         message = format('version %s came before it finished', new.version)
   where r.formation_id = new.id and r.finished_at is null;
  v_canary := case when v_revert or new.kind <> 'service' then 0 else least(new.canary, new.replicas) end;
  insert into pgfleet.rollouts (formation_id, from_version, to_version, revert, canary, state, started_by)
  values (new.id, old.version, new.version, v_revert, v_canary,
          case when v_canary > 0 then 'canary' else 'running' end, pgfleet.caller());
  return new;  -- (formations_notify wakes the schedulers)
end $$;
comment on function pgfleet.formations_version() is
  'BEFORE INSERT OR UPDATE on formations: a new formation is version 1; a change of its template makes the next pgfleet.formation_versions row and, for a service or system formation, a pgfleet.rollouts row (superseding an active one); a change of version alone must be to a version of that template (a revert).';
revoke execute on function pgfleet.formations_version() from public;

drop trigger if exists formations_version on pgfleet.formations;
create trigger formations_version
  before insert or update on pgfleet.formations
  for each row execute function pgfleet.formations_version();

create or replace function pgfleet.formations_first_version() returns trigger
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  insert into pgfleet.formation_versions (formation_id, version, template, privileged, created_by, note)
  select n.id, n.version, pgfleet.formation_template(n), n.privileged, pgfleet.caller(), 'created'
    from new_formations n;
  return null;
end $$;
comment on function pgfleet.formations_first_version() is
  'AFTER INSERT on formations (per statement): records each new formation''s version 1 in pgfleet.formation_versions.';
revoke execute on function pgfleet.formations_first_version() from public;

drop trigger if exists formations_first_version on pgfleet.formations;
create trigger formations_first_version
  after insert on pgfleet.formations
  referencing new table as new_formations
  for each statement execute function pgfleet.formations_first_version();

-- The settings pgfleet.update_formation changes: the template and how the
-- formation runs, never who owns it or what it is.
create or replace function pgfleet.formation_update_columns() returns text[]
language sql immutable as $$
  select pgfleet.template_columns()
         || array['replicas', 'spread', 'max_parallel', 'min_healthy_time', 'canary',
                  'progress_deadline', 'auto_revert', 'max_running',
                  'preemptible', 'min_available']
$$;
comment on function pgfleet.formation_update_columns() is
  'The columns pgfleet.update_formation may change: the job template (pgfleet.template_columns()), replicas, spread, the rollout settings, max_running, preemptible and min_available.';

-- Security invoker: the caller's UPDATE grant on formations and the
-- template's checks (formations_check_template) apply as to a plain UPDATE.
create or replace function pgfleet.update_formation(p_formation text, p_changes jsonb)
returns integer
language plpgsql as $$
declare
  v_bad text;
  v_key text;
  v_cols text;
  v_version integer;
begin
  if p_changes is null or jsonb_typeof(p_changes) <> 'object' or p_changes = '{}'::jsonb then
    raise exception 'changes must be a non-empty object of column names and values (got %)',
                    coalesce(p_changes::text, 'null')
      using errcode = 'invalid_parameter_value';
  end if;
  select k into v_bad from jsonb_object_keys(p_changes) k
   where k <> all (pgfleet.formation_update_columns()) limit 1;
  if v_bad is not null then
    raise exception 'column % cannot be changed by update_formation (allowed: %)', v_bad,
                    array_to_string(pgfleet.formation_update_columns(), ', ')
      using errcode = 'invalid_parameter_value', column = v_bad;
  end if;
  -- Each value on its own first, so a bad one is named ("progress_deadline:
  -- invalid input syntax for type interval").
  for v_key in select jsonb_object_keys(p_changes) loop
    begin
      perform jsonb_populate_record(null::pgfleet.formations, jsonb_build_object(v_key, p_changes -> v_key));
    exception when others then
      raise exception '%: %', v_key, sqlerrm using errcode = sqlstate, column = v_key;
    end;
  end loop;
  select string_agg(quote_ident(k), ', ' order by k) into v_cols from jsonb_object_keys(p_changes) k;
  execute format(
    'update pgfleet.formations f set (%1$s) = (select %2$s from jsonb_populate_record(f, $1) r)
      where f.name = $2 and f.deleted_at is null returning f.version', v_cols,
    (select string_agg('r.' || quote_ident(k), ', ' order by k) from jsonb_object_keys(p_changes) k))
    into v_version using p_changes, p_formation;
  if v_version is null then
    raise exception 'no formation named %', p_formation using errcode = 'no_data_found';
  end if;
  return v_version;
end $$;
comment on function pgfleet.update_formation(text, jsonb) is
  'Changes formation p_formation''s columns named in p_changes (an object; pgfleet.formation_update_columns() lists those allowed) as one UPDATE; returns its version after (a template change makes a new one and starts a rollout).';

-- The one UPDATE that puts a recorded version back: its template and its
-- number (formations_version checks that they belong together). As the
-- caller: a role's revert passes the template's checks as its edit would.
create or replace function pgfleet.apply_version(p_formation integer, p_version integer)
returns void
language plpgsql as $$
begin
  execute format(
    'update pgfleet.formations f set (%1$s) = (select %2$s from jsonb_populate_record(f, v.template) r),
            version = v.version
       from pgfleet.formation_versions v
      where f.id = $1 and v.formation_id = f.id and v.version = $2',
    (select string_agg(quote_ident(c), ', ') from unnest(pgfleet.template_columns()) c),
    (select string_agg('r.' || quote_ident(c), ', ') from unnest(pgfleet.template_columns()) c))
    using p_formation, p_version;
end $$;
comment on function pgfleet.apply_version(integer, integer) is
  'Sets formation p_formation''s template and version back to its recorded version p_version (used by pgfleet.revert and pgfleet.fail_rollout).';

create or replace function pgfleet.revert(p_formation text, p_version integer) returns void
language plpgsql as $$
declare
  v_id integer;
  v_current integer;
  v_template jsonb;
begin
  select f.id, f.version into v_id, v_current from pgfleet.formations f
   where f.name = p_formation and f.deleted_at is null;
  if v_id is null then
    raise exception 'no formation named %', p_formation using errcode = 'no_data_found';
  end if;
  select v.template into v_template from pgfleet.formation_versions v
   where v.formation_id = v_id and v.version = p_version;
  if v_template is null then
    raise exception 'formation % has no version % (it has 1 to %)', p_formation, p_version,
                    (select max(v.version) from pgfleet.formation_versions v where v.formation_id = v_id)
      using errcode = 'no_data_found', column = 'version';
  end if;
  if p_version = v_current then
    raise exception 'formation % already runs version %', p_formation, p_version
      using errcode = 'check_violation', column = 'version';
  end if;
  perform pgfleet.apply_version(v_id, p_version);
end $$;
comment on function pgfleet.revert(text, integer) is
  'Rolls formation p_formation back to version p_version: its template becomes that version''s and a rollout replaces the replicas (as the caller: the template''s checks apply).';

create or replace function pgfleet.promote(p_formation text) returns void
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_rollout pgfleet.rollouts;
begin
  perform pgfleet.require_role('pgfleet_operator', 'promoting a rollout');
  select r.* into v_rollout from pgfleet.rollouts r
    join pgfleet.formations f on f.id = r.formation_id
   where f.name = p_formation and r.finished_at is null
   for update of r;
  if v_rollout.id is null then
    raise exception 'formation % has no rollout in progress', p_formation using errcode = 'no_data_found';
  end if;
  if v_rollout.state = 'canary' then
    raise exception 'the canaries of formation % (version %) are not healthy yet: pgfleet.rollout_status shows them',
                    p_formation, v_rollout.to_version
      using errcode = 'object_not_in_prerequisite_state';
  end if;
  if v_rollout.state <> 'waiting_promotion' then
    raise exception 'the rollout of formation % (version %) waits for no promotion (it is %)', p_formation,
                    v_rollout.to_version, v_rollout.state
      using errcode = 'object_not_in_prerequisite_state';
  end if;
  update pgfleet.rollouts set state = 'running', promoted_at = now(), promoted_by = pgfleet.caller(),
         progress_at = now(), message = null
   where id = v_rollout.id;
  perform pg_notify(pgfleet.work_channel(), v_rollout.formation_id::text);
end $$;
comment on function pgfleet.promote(text) is
  'Promotes the healthy canaries of formation p_formation''s rollout: the rollout then replaces the other replicas. Needs pgfleet_operator.';

-- The schedulers' writes of a rollout, each under the formation's lock.
create or replace function pgfleet.rollout_progress(p_rollout bigint, p_state text, p_updated integer,
                                                    p_healthy integer, p_message text)
returns void
language sql security definer set search_path = pgfleet, pg_temp as $$
  update pgfleet.rollouts r
     set state = p_state, updated = p_updated, healthy = p_healthy, message = p_message,
         progress_at = case when p_healthy > r.healthy then now() else r.progress_at end
   where r.id = p_rollout and r.finished_at is null
     and (r.state, r.updated, r.healthy, r.message) is distinct from (p_state, p_updated, p_healthy, p_message)
$$;
comment on function pgfleet.rollout_progress(bigint, text, integer, integer, text) is
  'A scheduler records active rollout p_rollout''s phase and counts (written only when they change); more healthy replicas than before is progress (progress_at).';

create or replace function pgfleet.finish_rollout(p_rollout bigint, p_updated integer, p_healthy integer)
returns void
language sql security definer set search_path = pgfleet, pg_temp as $$
  with r as (
    update pgfleet.rollouts r set state = 'succeeded', finished_at = now(), updated = p_updated,
           healthy = p_healthy, message = null
     where r.id = p_rollout and r.finished_at is null
     returning r.formation_id, r.to_version)
  update pgfleet.formation_versions v set healthy_at = now()
    from r where v.formation_id = r.formation_id and v.version = r.to_version
$$;
comment on function pgfleet.finish_rollout(bigint, integer, integer) is
  'A scheduler ends rollout p_rollout as succeeded (every replica runs its version, healthy) and marks that version healthy.';

-- A rollout past its progress deadline fails; with auto_revert the
-- formation goes back to the newest earlier version that was healthy, the
-- template restored as its writer made it (privileged included).
create or replace function pgfleet.fail_rollout(p_rollout bigint, p_why text) returns integer
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_r pgfleet.rollouts;
  v_f pgfleet.formations;
  v_back integer;
begin
  select * into v_r from pgfleet.rollouts where id = p_rollout and finished_at is null;
  if v_r.id is null then
    return null;
  end if;
  select * into v_f from pgfleet.formations where id = v_r.formation_id;
  if v_f.auto_revert then
    select max(v.version) into v_back from pgfleet.formation_versions v
     where v.formation_id = v_f.id and v.version <> v_r.to_version and v.healthy_at is not null;
  end if;
  if v_back is not null then
    perform pgfleet.apply_version(v_f.id, v_back);
  end if;
  update pgfleet.rollouts
     set state = case when v_back is null then 'failed' else 'reverted' end, finished_at = now(),
         message = p_why || case when v_back is null then '' else format('; reverted to version %s', v_back) end
   where id = p_rollout;
  return v_back;
end $$;
comment on function pgfleet.fail_rollout(bigint, text) is
  'A scheduler ends rollout p_rollout as failed (p_why: what it waited for); with the formation''s auto_revert, reverts to the newest earlier healthy version and returns it (the revert is a rollout of its own).';
revoke execute on function pgfleet.rollout_progress(bigint, text, integer, integer, text),
                           pgfleet.finish_rollout(bigint, integer, integer),
                           pgfleet.fail_rollout(bigint, text) from public;
grant execute on function pgfleet.rollout_progress(bigint, text, integer, integer, text),
                          pgfleet.finish_rollout(bigint, integer, integer),
                          pgfleet.fail_rollout(bigint, text) to pgfleet_scheduler;

drop view if exists pgfleet.rollout_status;
create view pgfleet.rollout_status as
select r.id as rollout, f.name as formation, r.from_version, r.to_version as version, r.revert,
       r.state,
       d.desired,
       coalesce(c.updated, r.updated) as updated,
       coalesce(c.healthy, r.healthy) as healthy,
       coalesce(c.unhealthy, 0) as unhealthy,
       coalesce(c.old, 0) as old,
       r.canary,
       r.state = 'waiting_promotion' as waiting_for_promotion,
       pgfleet.max_parallel_count(f.max_parallel, d.desired) as max_parallel,
       r.started_by, r.started_at,
       case when r.finished_at is null and r.state <> 'waiting_promotion'
            then r.progress_at + f.progress_deadline end as deadline,
       r.promoted_at, r.finished_at, r.message
  from pgfleet.rollouts r
  join pgfleet.formations f on f.id = r.formation_id
  -- a service's replicas; a system formation's eligible hosts (its
  -- max_parallel resolves against them, as the scheduler's does)
  cross join lateral (
    select case when f.kind = 'service' then f.replicas
                else (select count(*)::integer from pgfleet.system_hosts(f.id)) end as desired) d
  left join lateral (
    select count(*) filter (where j.version = r.to_version)::integer as updated,
           count(*) filter (where j.version = r.to_version
                              and pgfleet.replica_healthy_since(j) is not null)::integer as healthy,
           count(*) filter (where j.version = r.to_version and j.health = 'unhealthy')::integer as unhealthy,
           count(*) filter (where j.version is distinct from r.to_version)::integer as old
      from pgfleet.jobs j
     where j.formation = f.name and j.state in ('pending', 'assigned', 'running')
       and j.desired_state = 'run') c on r.finished_at is null;
comment on view pgfleet.rollout_status is
  'One row per rollout (pgfleet.rollouts): version, desired replicas, updated (live replicas of the version), healthy and unhealthy of them, old (live replicas of other versions), canaries and whether they wait for promotion, the replicas replaced at a time, the progress deadline and state. Counts are live while it runs, as it ended afterwards.';
