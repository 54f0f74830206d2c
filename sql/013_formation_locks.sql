-- Formation scheduling locks: who holds one (schedulers for a pass; any
-- other session freezes the formation), saying so on its jobs, and letting
-- an operator end a foreign holder.
-- Who holds a formation's scheduling lock (pgfleet.lock_class(), formation
-- id): schedulers hold it for a pass, in a transaction; anything else that
-- takes it (any login may call pg_advisory_lock) freezes that formation
-- silently. A holder counts as a scheduler when its session says so
-- (application_name pgfleet-schedulerd, which schedulerd sets) and its role
-- is one (pgfleet_scheduler, or an admin). SECURITY DEFINER: pg_locks and
-- pg_stat_activity show other roles' sessions to the schema's owner.
create or replace function pgfleet.formation_lock_holders()
returns table (formation_id integer, formation text, pid integer, role text,
               application_name text, connected_since timestamptz, transaction_since timestamptz,
               session_state text, is_scheduler boolean)
language sql stable security definer set search_path = pgfleet, pg_catalog, pg_temp as $$
  select f.id, f.name, l.pid, a.usename::text, a.application_name, a.backend_start, a.xact_start,
         a.state,
         a.application_name = 'pgfleet-schedulerd' and pgfleet.has_role(a.usename::text, 'pgfleet_scheduler')
    from pg_locks l
    join pg_stat_activity a on a.pid = l.pid
    join pgfleet.formations f on f.id::bigint = l.objid::bigint
   where l.locktype = 'advisory' and l.granted and l.objsubid = 2
     and l.database = (select oid from pg_database where datname = current_database())
     and l.classid::bigint = pgfleet.lock_class()
$$;
comment on function pgfleet.formation_lock_holders() is
  'Sessions holding a formation''s scheduling lock now: the formation, the pid, role, application, since when the session and its transaction exist, and whether it is a scheduler''s.';

-- Formations whose lock a session that is not a scheduler's has held for
-- longer than p_grace (its session that old at least): their pending jobs'
-- error says who holds it, written only when it changes. Returns how many
-- such formations there are. Called by the schedulers' maintenance.
create or replace function pgfleet.note_foreign_formation_locks(p_grace interval)
returns integer
language plpgsql security definer set search_path = pgfleet, pg_catalog, pg_temp as $$
declare
  h record;
  v_count integer := 0;
  v_error text;
begin
  for h in
    select distinct on (x.formation_id) x.* from pgfleet.formation_lock_holders() x
     where not x.is_scheduler and x.connected_since < now() - p_grace
     order by x.formation_id, x.connected_since
  loop
    v_count := v_count + 1;
    v_error := format('waiting: formation %s''s scheduling lock is held by pid %s (role %s, application "%s", '
                      'connected since %s), not a scheduler; select pgfleet.release_formation_lock(%L) ends that session',
                      h.formation, h.pid, h.role, left(coalesce(h.application_name, ''), 60),
                      to_char(h.connected_since, 'YYYY-MM-DD HH24:MI:SS TZ'), h.formation);
    update pgfleet.jobs j set error = v_error
     where j.formation = h.formation and j.state = 'pending' and j.error is distinct from v_error;
  end loop;
  return v_count;
end $$;
comment on function pgfleet.note_foreign_formation_locks(interval) is
  'Writes into the pending jobs of every formation whose scheduling lock a non-scheduler session has held longer than p_grace who holds it and the remedy; returns how many formations are so held.';

create or replace function pgfleet.release_formation_lock(p_formation text) returns integer
language plpgsql security definer set search_path = pgfleet, pg_catalog, pg_temp as $$
declare
  v_count integer := 0;
  h record;
begin
  perform pgfleet.require_role('pgfleet_operator', 'releasing a formation''s lock');
  for h in select * from pgfleet.formation_lock_holders() x
            where x.formation = p_formation and not x.is_scheduler loop
    if pg_terminate_backend(h.pid) then
      v_count := v_count + 1;
    end if;
  end loop;
  return v_count;
end $$;
comment on function pgfleet.release_formation_lock(text) is
  'Operator control: ends every session that is not a scheduler''s and holds the formation''s scheduling lock (pg_terminate_backend). Returns how many.';
-- (formation_lock_holders stays executable: pgfleet.formation_locks, which
-- every role reads, calls it as its reader.)
revoke execute on function pgfleet.note_foreign_formation_locks(interval) from public;
grant execute on function pgfleet.note_foreign_formation_locks(interval) to pgfleet_scheduler;
