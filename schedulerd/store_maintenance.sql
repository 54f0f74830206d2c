-- schedulerd's maintenance statements (store_maintenance.cpp): its own
-- heartbeat, lost hosts and overdue drains, pruning. Prepared with the rest
-- by store::Prepare. Each block is a db::Statement constant k<Name>
-- (cmake/embed_queries.cmake).

-- name: schedulerd_heartbeat
insert into pgfleet.schedulers (id, hostname, pid, metrics_url) values ($1, $2, $3, $4)
 on conflict (id) do update set last_seen = now(), hostname = excluded.hostname,
 pid = excluded.pid, metrics_url = excluded.metrics_url;

-- name: schedulerd_host_ttl_seconds
select extract(epoch from pgfleet.host_ttl())::float8 as seconds;

-- name: schedulerd_sweep_lost_hosts
select host_id, requeued from pgfleet.sweep_lost_hosts($1);

-- name: schedulerd_read_loss_guard
select held_since is not null as held, held_hosts, of_hosts, waiting_for_rate
  from pgfleet.host_loss_guard;

-- name: schedulerd_note_foreign_formation_locks
select pgfleet.note_foreign_formation_locks(make_interval(secs => $1)) as held;

-- name: schedulerd_evict_overdue_drains
select pgfleet.evict_overdue_drains() as evicted;

-- name: schedulerd_settle_dependencies
select pgfleet.settle_all_dependents() as settled;

-- name: schedulerd_try_lock_prune
select pg_try_advisory_xact_lock($1, $2) as locked;

-- name: schedulerd_prune_finished
select pgfleet.prune_finished(make_interval(secs => $1), $2) as pruned;

-- name: schedulerd_forget_stale_schedulers
delete from pgfleet.schedulers where last_seen < now() - interval '1 day';

-- name: schedulerd_prune_deleted_formations
select pgfleet.prune_deleted_formations();

-- name: schedulerd_cluster_gauges
-- What a scheduler's /metrics shows of the whole cluster, read every few
-- seconds (not per pass): live jobs by state, hosts by state, and how long
-- the oldest job ready to place has waited (pending, to run, due: a job
-- waiting for a later not_before is not waiting for the scheduler). Finished
-- jobs are counters of their own (a count over every finished row would
-- grow with retention).
select 'jobs' as kind, s.state, count(j.id)::float8 as value
  from unnest(array['pending', 'assigned', 'running']) s(state)
  left join pgfleet.jobs j on j.state = s.state
 group by s.state
union all
select 'hosts', s.state, count(h.id)::float8
  from unnest(array['up', 'draining', 'offline', 'lost']) s(state)
  left join pgfleet.hosts h on h.state = s.state
 group by s.state
union all
select 'oldest_pending', '',
       coalesce(extract(epoch from now() - min(j.created_at)), 0)::float8
  from pgfleet.jobs j
 where j.state = 'pending' and j.desired_state = 'run'
   and (j.not_before is null or j.not_before <= now());
