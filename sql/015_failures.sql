-- Failures: hosts lost without a heartbeat, and old finished jobs pruned.

-- Heartbeat ages never count time the database was down or out of the
-- sweeper's reach: they count from the later of the database's start (a
-- restart; a promoted standby's sessions all start after its promotion) and
-- the sweeping session's start (a scheduler that could not reach the database
-- reconnected). Nomad gives every node a fresh TTL after a leader election for
-- the same reason.
create or replace function pgfleet.hosts_judged_from() returns timestamptz
language sql stable as $$
  select greatest(pg_postmaster_start_time(),
                  (select a.backend_start from pg_stat_activity a where a.pid = pg_backend_pid()))
$$;
comment on function pgfleet.hosts_judged_from() is
  'The earliest time a host''s silence counts from in this session: the later of the database''s start and this session''s (see pgfleet.sweep_lost_hosts).';

-- The guard's row when the sweep finds no host it may judge: a hold or a
-- rate limit in force ends, and an end of a hold is recorded.
create or replace function pgfleet.host_loss_guard_clear(p_silent integer, p_hosts integer) returns void
language plpgsql as $$
declare
  g record;
begin
  select * into g from pgfleet.host_loss_guard for update;
  if g.held_since is not null then
    insert into pgfleet.host_loss_events (kind, silent_hosts, of_hosts, detail)
    values ('resumed', p_silent, p_hosts,
            format('heartbeats resumed after a hold of %s s: %s of %s hosts still silent, judged one by one',
                   round(extract(epoch from now() - g.held_since)::numeric, 1), p_silent, p_hosts));
  end if;
  if g.held_since is not null or g.waiting_for_rate <> 0 then
    update pgfleet.host_loss_guard
       set held_since = null, held_hosts = 0, of_hosts = p_hosts, waiting_for_rate = 0, updated_at = now();
  end if;
end $$;
comment on function pgfleet.host_loss_guard_clear(integer, integer) is
  'Ends a hold or a rate limit of the lost-host guard (pgfleet.host_loss_guard), recording a resumed event when a hold ends. Called by pgfleet.sweep_lost_hosts.';

-- What the guard holds now, for views every role reads (cluster_summary):
-- counts only. PL/pgSQL, so sql/ can be created before the table exists, as
-- the migration tests do.
create or replace function pgfleet.host_loss_guard_status()
returns table (held_since timestamptz, held_hosts integer, waiting_for_rate integer)
language plpgsql stable security definer set search_path = pgfleet, pg_temp as $$
begin
  return query select g.held_since, g.held_hosts, g.waiting_for_rate from pgfleet.host_loss_guard g;
end $$;
comment on function pgfleet.host_loss_guard_status() is
  'The lost-host guard''s row (pgfleet.host_loss_guard): since when a mass loss is held, how many hosts it holds, how many wait for the loss rate limit.';

create or replace function pgfleet.sweep_lost_hosts(p_ttl_seconds double precision,
                                                    p_judged_from timestamptz default null)
returns table (host_id text, requeued integer)
language plpgsql as $$
-- Hosts whose last heartbeat, by the database clock, is older than the TTL
-- are marked lost, and their unfinished attempts go back to pending as new
-- attempts with a 'lost' event, by the host-loss rule
-- (pgfleet.state_after_host_loss, shared with the lost reports of
-- report_jobs), with three guards:
--
--   - silence counts from p_judged_from at the earliest (default
--     pgfleet.hosts_judged_from(): the database's and this session's start),
--     so an outage of the database, or of the sweeper's link to it, expires
--     no host that heartbeats within a TTL of its end;
--   - when at least host_loss_guard_min_hosts hosts, and more than
--     host_loss_guard_share of the hosts not lost, are silent at once (for
--     half the TTL or more), none is declared lost (Kubernetes' unhealthy-zone threshold: a control-plane
--     or pooler outage is likelier than that many machines failing); the hold
--     is recorded in host_loss_guard and host_loss_events, and hosts are
--     judged one by one again once enough heartbeats resume;
--   - at most greatest(host_losses_per_minute, host_losses_per_minute_share
--     of the hosts) are declared lost in any minute, the longest silent first.
--
-- Every guard only ever delays a loss, never hastens one: a host's self-fence
-- (hostd, its shims) kills its jobs host_ttl less a margin after its last
-- successful heartbeat by its own clock, so a job is never requeued while its
-- old attempt can still run.
--
-- Safe to run from every scheduler at once: a sweep that finds silent hosts
-- takes the guard's row first (only sweeps take it), and the guarded update
-- of each host row lets exactly one win it. Lock order: guard, jobs, hosts.
declare
  h record;
  v_count integer;
  v_ttl interval := make_interval(secs => p_ttl_seconds);
  v_cutoff timestamptz := now() - make_interval(secs => p_ttl_seconds);
  v_silent text[];
  v_n integer;
  v_missing integer;
  v_hosts integer;
  v_limit integer;
  v_recent integer;
  v_allowed integer;
  g record;
  v_share numeric := pgfleet.setting_number('host_loss_guard_share');
  v_min integer := pgfleet.setting_number('host_loss_guard_min_hosts');
begin
  if coalesce(p_judged_from, pgfleet.hosts_judged_from()) >= v_cutoff then
    return;  -- within a TTL of the database coming back: no host is judged yet
  end if;
  if not exists (select 1 from pgfleet.hosts x join pgfleet.host_heartbeats hb on hb.host_id = x.id
                  where x.state <> 'lost' and hb.last_seen < v_cutoff) then
    if exists (select 1 from pgfleet.host_loss_guard g2 where g2.held_since is not null or g2.waiting_for_rate <> 0) then
      perform pgfleet.host_loss_guard_clear(0, (select count(*)::integer from pgfleet.hosts x where x.state <> 'lost'));
    end if;
    return;
  end if;
  select * into g from pgfleet.host_loss_guard for update;
  select array_agg(x.id order by hb.last_seen, x.id) into v_silent
    from pgfleet.hosts x join pgfleet.host_heartbeats hb on hb.host_id = x.id
   where x.state <> 'lost' and hb.last_seen < v_cutoff;
  select count(*), count(*) filter (where hb.last_seen < v_cutoff + v_ttl / 2)
    into v_hosts, v_missing
    from pgfleet.hosts x left join pgfleet.host_heartbeats hb on hb.host_id = x.id
   where x.state <> 'lost';
  v_n := coalesce(cardinality(v_silent), 0);
  if v_n = 0 then
    perform pgfleet.host_loss_guard_clear(0, v_hosts);
    return;
  end if;

  -- The guard counts every host that has missed heartbeats for half the TTL,
  -- not only those past it: hosts cut off at once went silent at different
  -- points of their heartbeat interval, and the first to pass the TTL alone
  -- would be too few to look like an outage.
  if v_missing >= v_min and v_missing > v_share * v_hosts then
    if g.held_since is null then
      update pgfleet.host_loss_guard
         set held_since = now(), held_hosts = v_missing, of_hosts = v_hosts, waiting_for_rate = 0,
             updated_at = now();
      insert into pgfleet.host_loss_events (kind, silent_hosts, of_hosts, detail)
      values ('held', v_missing, v_hosts,
              format('%s of %s hosts missed heartbeats at once: treating it as a control-plane outage; '
                     'none is declared lost until heartbeats resume (host_loss_guard_share %s, '
                     'host_loss_guard_min_hosts %s)', v_missing, v_hosts, v_share, v_min));
    elsif g.held_hosts <> v_missing or g.of_hosts <> v_hosts then
      update pgfleet.host_loss_guard set held_hosts = v_missing, of_hosts = v_hosts, updated_at = now();
    end if;
    return;
  end if;
  if g.held_since is not null then
    perform pgfleet.host_loss_guard_clear(v_n, v_hosts);
    g.waiting_for_rate := 0;
  end if;

  v_limit := greatest(pgfleet.setting_number('host_losses_per_minute'),
                      ceil(pgfleet.setting_number('host_losses_per_minute_share') * v_hosts));
  select count(*) into v_recent from pgfleet.hosts x where x.lost_at > now() - interval '1 minute';
  v_allowed := least(v_n, greatest(0, v_limit - v_recent));
  if v_n - v_allowed <> g.waiting_for_rate then
    update pgfleet.host_loss_guard set waiting_for_rate = v_n - v_allowed, updated_at = now();
    if g.waiting_for_rate = 0 then
      insert into pgfleet.host_loss_events (kind, silent_hosts, of_hosts, detail)
      values ('rate_limited', v_n, v_hosts,
              format('%s silent hosts wait: at most %s hosts are declared lost in a minute '
                     '(host_losses_per_minute %s, host_losses_per_minute_share %s of %s hosts); '
                     '%s were in the last minute', v_n - v_allowed, v_limit,
                     pgfleet.setting_number('host_losses_per_minute'),
                     pgfleet.setting_number('host_losses_per_minute_share'), v_hosts, v_recent));
    end if;
  end if;

  for h in select s.id from unnest(v_silent[1:v_allowed]) as s(id) loop
    perform 1 from pgfleet.jobs j where j.host_id = h.id and j.state in ('assigned', 'running') for update;
    update pgfleet.hosts x set state = 'lost', lost_at = now()
     where x.id = h.id and x.state <> 'lost'
       and exists (select 1 from pgfleet.host_heartbeats hb where hb.host_id = x.id and hb.last_seen < v_cutoff);
    if not found then
      continue;  -- another scheduler won it, or the heartbeat came back
    end if;
    with lost as (
      select j.id, pgfleet.state_after_host_loss(j.desired_state, j.host_losses + 1) as state
        from pgfleet.jobs j where j.host_id = h.id and j.state in ('assigned', 'running')
    ), moved as (
      update pgfleet.jobs j
         set state = l.state,
             host_losses = j.host_losses + 1,
             error = 'host ' || h.id || ' lost (no heartbeat for ' || p_ttl_seconds || ' s)'
                     || pgfleet.host_loss_note(l.state),
             finished_at = case when l.state <> 'pending' then now() end,
             not_before = null, preempted_by = null
        from lost l
       where j.id = l.id
      returning j.id, j.attempt, j.cpu, j.memory, j.state
    ), freed as (
      update pgfleet.hosts x
         set cpu_allocated = x.cpu_allocated - s.cpu, memory_allocated = x.memory_allocated - s.memory
        from (select coalesce(sum(cpu), 0)::integer as cpu, coalesce(sum(memory), 0)::integer as memory from moved) s
       where x.id = h.id
    ), events as (
      insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
      select m.id, m.attempt, 'lost', h.id,
             'host lost (no heartbeat for ' || p_ttl_seconds || ' s); now ' || m.state
             || pgfleet.host_loss_note(m.state) from moved m
    )
    select count(*) into v_count from moved;
    host_id := h.id;
    requeued := v_count;
    perform pg_notify(pgfleet.work_channel(), pgfleet.all_formations());
    return next;
  end loop;
end $$;
comment on function pgfleet.sweep_lost_hosts(double precision, timestamptz) is
  'Marks hosts without a heartbeat for p_ttl_seconds as lost and requeues their unfinished attempts as new attempts. Silence counts from p_judged_from at the earliest (default pgfleet.hosts_judged_from()); a mass loss is held and losses are rate-limited (pgfleet.host_loss_guard). Idempotent; one caller wins each host.';

create or replace function pgfleet.prune_finished(p_older_than interval, p_batch integer) returns integer
language sql as $$
  with old as (
    select id from pgfleet.jobs
     where finished_at < now() - p_older_than and state in ('succeeded', 'failed', 'cancelled')
     order by finished_at limit p_batch
     for update skip locked
  ), gone as (
    delete from pgfleet.jobs j using old where j.id = old.id returning 1
  )
  select count(*)::integer from gone
$$;
comment on function pgfleet.prune_finished(interval, integer) is
  'Deletes up to p_batch finished jobs (and, by the trigger jobs_after_delete, their events) that finished before now() - p_older_than. Returns how many.';
