-- schedulerd's statements (store.cpp): read by the formation pass, the
-- dispatcher and the stop forwarder; store::Prepare prepares them on every
-- connection, PrepareListen and PrepareDispatchOutcomes their own few.
-- Each block is a db::Statement constant k<Name> (cmake/embed_queries.cmake).

-- name: schedulerd_formations_to_work
-- $1: all formations; else only those in $2.
select f.id from pgfleet.formations f
  left join lateral (select greatest(
      (select max(j.priority) from pgfleet.jobs j
        where j.formation = f.name and j.state = 'pending' and j.desired_state = 'run'
          and j.not_before is null),
      (select max(j.priority) from pgfleet.jobs j
        where j.state = 'pending' and j.not_before is not null and j.not_before <= now()
          and j.formation = f.name and j.desired_state = 'run')) as p) m on true
 where ($1::boolean or f.id = any($2::integer[]))
   and (m.p is not null
    or f.kind = 'system'
    or (f.kind = 'sysbatch' and f.done_at is null)
    or (f.kind = 'cron' and f.deleted_at is null and f.next_due_at <= now())
    or (f.kind = 'service'
        and (f.replicas <> (select count(*) from pgfleet.jobs j where j.formation = f.name
                              and j.state in ('pending', 'assigned', 'running')
                              and j.desired_state = 'run')
             or exists (select 1 from pgfleet.jobs j join pgfleet.hosts h
                          on h.id = j.host_id
                         where j.formation = f.name and j.state in ('assigned', 'running')
                           and j.desired_state = 'run'
                           and h.state in ('draining', 'offline'))))
    or exists (select 1 from pgfleet.rollouts r
                where r.formation_id = f.id and r.finished_at is null))
 order by m.p desc nulls last, f.id;

-- name: schedulerd_lock_formation
-- The lock is taken only for the formation's row (none: gone, nothing to do).
-- Its shape read in the same statement, before the lock, is what it would
-- be after it: schedulers never change a formation's kind or replicas.
-- `done` may be set meanwhile (pgfleet.formation_done waits for the lock,
-- not the other way round): schedulerd_create_sysbatch_jobs reads it again.
select pgfleet.try_lock_formation(f.id) as locked, f.kind = 'service' as is_service,
       f.kind = 'system' as is_system, f.kind = 'sysbatch' as is_sysbatch,
       f.done_at is not null as done,
       f.kind = 'cron' as is_cron, coalesce(f.next_due_at <= now(), false) as cron_due,
       f.replicas, f.name, coalesce(f.spread, '') as spread,
       exists (select 1 from pgfleet.rollouts r
                where r.formation_id = f.id and r.finished_at is null) as rolling_out,
       coalesce(f.max_running, 0) as max_running,
       exists (select 1 from pgfleet.owner_quotas) as quotas
  from pgfleet.formations f where f.id = $1;

-- name: schedulerd_formation_live
-- A formation's jobs assigned or running, for its max_running: read after
-- the formation's lock is held (this statement's snapshot sees every
-- assignment of a pass that held it before), as assign_jobs counts them.
select count(*)::integer as live from pgfleet.jobs j
 where j.state in ('assigned', 'running') and j.formation = $1;

-- name: schedulerd_owner_quotas
-- The quotas of the owners of $1 and what their live jobs take now
-- (advisory: assign_jobs counts again under the quota's row lock).
select q.owner, coalesce(q.max_cpu, -1)::bigint as max_cpu,
       coalesce(q.max_memory, -1)::bigint as max_memory,
       coalesce(q.max_running, -1)::bigint as max_running, u.cpu, u.memory, u.running
  from pgfleet.owner_quotas q
  cross join lateral pgfleet.owner_in_use(q.owner) u
 where q.owner = any($1::text[]);

-- name: schedulerd_read_pending
-- What placement needs, without a lock and without the spec: a full fleet
-- places few of the jobs a pass reads. assign_jobs locks the jobs it assigns
-- and returns their specs (docs/decisions/0014).
-- Ready jobs (jobs_ready_idx) and jobs whose not_before has come
-- (jobs_retry_at_idx), each in priority order: never a job waiting for a
-- later not_before, however many there are (migration 0023).
select * from (
 (select j.id, j.cpu, j.memory, j.priority, j.constraints::text as constraints,
         j.privileged, coalesce(j.error, '') as reason, coalesce(j.pinned_host, '') as pinned_host,
         j.network = 'bridge' as bridge, coalesce(j.ports::text, '') as ports, j.owner,
         coalesce(j.rootfs, '') as rootfs
    from pgfleet.jobs j
   where j.formation = $1 and j.state = 'pending' and j.desired_state = 'run'
     and j.not_before is null
   order by j.priority desc, j.id limit $2)
 union all
 (select j.id, j.cpu, j.memory, j.priority, j.constraints::text as constraints,
         j.privileged, coalesce(j.error, '') as reason, coalesce(j.pinned_host, '') as pinned_host,
         j.network = 'bridge' as bridge, coalesce(j.ports::text, '') as ports, j.owner,
         coalesce(j.rootfs, '') as rootfs
    from pgfleet.jobs j
   where j.state = 'pending' and j.not_before is not null and j.not_before <= now()
     and j.formation = $1 and j.desired_state = 'run'
   order by j.priority desc, j.id limit $2)) c
 order by c.priority desc, c.id limit $2;

-- name: schedulerd_load_host_snapshot
-- What changes pass to pass; the rest (HostConfig) is kept by version.
-- The ports held, per host, in one scan of job_ports (nothing to read when
-- no job has ports), not a probe per host.
select h.id, h.cpu, h.memory, h.cpu_allocated, h.memory_allocated, h.config_version,
       h.suspensions, coalesce(hb.condition, '') as condition,
       'bridge' = any(h.networks) as bridge, lower(h.port_range) as port_lo,
       upper(h.port_range) - 1 as port_hi, coalesce(p.held, '{}') as ports_held
  from pgfleet.hosts h join pgfleet.host_heartbeats hb on hb.host_id = h.id
  left join (select jp.host_id, array_agg(jp.port order by jp.port)::text as held
               from pgfleet.job_ports jp group by jp.host_id) p on p.host_id = h.id
 where h.state = 'up' and h.admitted
   and (h.suspended_until is null or h.suspended_until <= now())
   -- host_ttl() once (an init plan), not once per host row
   -- (docs/benchmarks/2026-11-25-fewer-statements-per-job.md)
   and hb.last_seen > (select now() - pgfleet.host_ttl());

-- name: schedulerd_lock_hosts
-- The hosts of $1 still up and not suspended, locked for the pass (skipping
-- those another transaction holds), as locked.
select h.id, h.cpu, h.memory, h.cpu_allocated, h.memory_allocated from pgfleet.hosts h
 where h.id = any($1::text[]) and h.state = 'up' and h.admitted
   and (h.suspended_until is null or h.suspended_until <= now())
 order by h.id
   for update of h skip locked;

-- name: schedulerd_load_host_configs
select h.id, h.config_version, h.labels::text as labels, h.api_url,
       pgfleet.driver_isolates(h.driver) as isolates,
       coalesce(encode(k.key, 'hex'), '') as ticket_key,
       coalesce(array_to_json(r.names)::text, '[]') as rootfs_warm
  from pgfleet.hosts h left join pgfleet.host_keys k on k.host_id = h.id
  left join pgfleet.host_rootfs r on r.host_id = h.id  -- pgfleet.report_rootfs_warm bumps the version
 where h.id = any($1::text[]);

-- name: schedulerd_assign_jobs
-- since_insert: seconds from the job's insert to this assignment, on the
-- database's clock, for a first attempt only (a retry's or a preempted job's
-- insert is long past), -1 otherwise; one primary-key probe per first
-- attempt (pgfleet_scheduler_insert_to_assigned_seconds).
select a.job_id, a.attempt, a.host_id, a.spec, a.uid,
       case when a.attempt = 1
            then coalesce((select extract(epoch from now() - j.created_at)::float8
                             from pgfleet.jobs j where j.id = a.job_id), -1)
            else -1 end as since_insert
  from pgfleet.assign_jobs($1::jsonb) a;

-- name: schedulerd_set_pending_reasons
select pgfleet.set_pending_reasons($1::jsonb);

-- name: schedulerd_live_replicas
-- healthy: for at least the formation's min_healthy_time, by the database's
-- clock (pgfleet.replica_healthy_since).
select j.id, j.state,
       coalesce(j.state in ('assigned', 'running') and h.state in ('draining', 'offline'),
                false) as on_leaving_host,
       coalesce(h.id, '') as host_id, coalesce(h.state, '') as host_state,
       coalesce(j.pinned_host, '') as pinned_host, coalesce(j.version, 0) as version,
       coalesce(pgfleet.replica_healthy_since(j) <= now() - f.min_healthy_time, false) as healthy,
       j.health = 'unhealthy' as unhealthy
  from pgfleet.jobs j left join pgfleet.hosts h on h.id = j.host_id
  join pgfleet.formations f on f.name = j.formation
 where j.formation = $1 and j.state in ('pending', 'assigned', 'running')
   and j.desired_state = 'run'
 for update of j;

-- name: schedulerd_formation_host_counts
-- Where a formation's assigned and running jobs are, for its spread: host
-- id -> how many (jobs_formation_state_idx).
select j.host_id, count(*)::integer as jobs
  from pgfleet.jobs j
 where j.formation = $1 and j.state in ('assigned', 'running') and j.desired_state = 'run'
   and j.host_id is not null
 group by j.host_id;

-- name: schedulerd_system_hosts
-- The hosts a system formation has one replica on (pgfleet.system_hosts).
select h as host_id from pgfleet.system_hosts($1) h;

-- name: schedulerd_create_system_replicas
select pgfleet.create_system_replicas($1, $2::text[]) as created;

-- name: schedulerd_sysbatch_jobs
-- A sysbatch formation's jobs since it was (re)created, in every state: the
-- host each is pinned to, whether it is pending, and whether that host
-- still exists (jobs_pinned_by_formation_idx). Only the formation's own
-- (its owner's, as schedulerd_create_sysbatch_jobs makes them): a job another
-- role inserted into it, pinned to a host, does not take that host's run.
select j.id, j.pinned_host::text as host_id, j.state = 'pending' and j.desired_state = 'run' as pending,
       exists (select 1 from pgfleet.hosts h where h.id = j.pinned_host) as host_exists
  from pgfleet.formations f
  join pgfleet.jobs j on j.formation = f.name and j.pinned_host is not null and j.owner = f.owner
 where f.id = $1 and j.created_at >= f.created_at;

-- name: schedulerd_create_sysbatch_jobs
-- One job pinned to each host of $2 (placement::ReconcileSysbatch checked
-- that none of them had one); none once the formation is done.
select pgfleet.insert_replicas($1, 'sysbatch', $2::text[]) as created;

-- name: schedulerd_cron_tick
-- A cron formation whose next due time has come: its jobs (pgfleet.cron_tick).
select pgfleet.cron_tick($1) as created;

-- name: schedulerd_create_replicas
select pgfleet.create_replicas($1, $2) as created;

-- name: schedulerd_stop_jobs
select pgfleet.stop_jobs($1::bigint[], $2);

-- name: schedulerd_dispatch_succeeded
select pgfleet.dispatch_succeeded($1::text[]);

-- name: schedulerd_dispatch_failed
select pgfleet.dispatch_failed($1, $2::jsonb, $3) as requeued;

-- name: schedulerd_dispatch_unanswered
select pgfleet.dispatch_unanswered($1);

-- name: schedulerd_stops_to_forward
select j.id, j.attempt, j.host_id, h.api_url, j.stop_force,
       coalesce(encode(k.key, 'hex'), '') as ticket_key from pgfleet.jobs j
  join pgfleet.hosts h on h.id = j.host_id
  left join pgfleet.host_keys k on k.host_id = h.id
 where j.desired_state = 'stop' and j.state in ('assigned', 'running');

-- name: schedulerd_record_pass_error
update pgfleet.formations set pass_error = $2, pass_failures = $3, pass_failed_at = now()
 where id = $1;

-- name: schedulerd_clear_pass_error
update pgfleet.formations set pass_error = null, pass_failures = 0
 where id = $1 and pass_error is not null;

-- name: schedulerd_set_lock_timeout
select set_config('lock_timeout', $1, false);

-- name: schedulerd_take_idle_lock
select pg_advisory_lock($1, $2);

-- name: schedulerd_release_idle_lock
select pg_advisory_unlock($1, $2);

-- name: schedulerd_next_retry_in
select pgfleet.next_retry_in() as seconds;
