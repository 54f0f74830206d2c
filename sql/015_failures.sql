-- Failures: hosts lost without a heartbeat, and old finished jobs pruned.

create or replace function pgfleet.sweep_lost_hosts(p_ttl_seconds double precision)
returns table (host_id text, requeued integer)
language plpgsql as $$
-- Hosts whose last heartbeat, by the database clock, is older than the TTL are
-- marked lost, and their unfinished attempts go back to pending as new attempts
-- with a 'lost' event, by the host-loss rule (pgfleet.state_after_host_loss,
-- shared with the lost reports of report_jobs). Safe to run from every
-- scheduler at once: the guarded update of the host row lets exactly one win
-- each host. Lock order: jobs before hosts.
declare
  h record;
  v_count integer;
  v_ttl interval := make_interval(secs => p_ttl_seconds);
begin
  for h in
    select x.id from pgfleet.hosts x join pgfleet.host_heartbeats hb on hb.host_id = x.id
     where x.state <> 'lost' and hb.last_seen < now() - v_ttl
     order by x.id
  loop
    perform 1 from pgfleet.jobs j where j.host_id = h.id and j.state in ('assigned', 'running') for update;
    update pgfleet.hosts x set state = 'lost'
     where x.id = h.id and x.state <> 'lost'
       and exists (select 1 from pgfleet.host_heartbeats hb where hb.host_id = x.id and hb.last_seen < now() - v_ttl);
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
             not_before = null
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
comment on function pgfleet.sweep_lost_hosts(double precision) is
  'Marks hosts without a heartbeat for p_ttl_seconds as lost and requeues their unfinished attempts as new attempts. Idempotent; one caller wins each host.';

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
