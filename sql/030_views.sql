-- Views for operators, re-created on every `pgfleet migrate`.
-- Dropped dependents first: cluster_summary reads host_status.
drop view if exists pgfleet.cluster_summary;

drop view if exists pgfleet.host_status;
create view pgfleet.host_status as
select h.id,
       h.state,
       hb.last_seen is not null and hb.last_seen > now() - pgfleet.host_ttl() as alive,
       round(extract(epoch from now() - hb.last_seen)::numeric, 1) as heartbeat_age_s,
       h.suspended_until > now() as suspended,
       h.suspended_until,
       hb.condition,
       h.cpu,
       h.cpu - h.cpu_allocated as cpu_free,
       h.memory,
       h.memory - h.memory_allocated as memory_free,
       (select count(*) from pgfleet.jobs j where j.host_id = h.id and j.state = 'running') as running_jobs,
       (select count(*) from pgfleet.jobs j where j.host_id = h.id and j.state = 'assigned') as assigned_jobs,
       h.labels,
       h.driver,
       h.driver_note,
       h.generation,
       h.api_url,
       h.registered_at,
       h.cpu_allocated,
       h.memory_allocated,
       u.cpu_used,
       u.memory_used_bytes,
       u.usage_at,
       h.admitted,
       h.admitted_by,
       h.declared_cpu,
       h.allowed_cpu,
       h.declared_memory,
       h.allowed_memory,
       h.declared_labels,
       h.allowed_labels,
       -- what the host declares beyond its admission's allowances (it is not offered)
       nullif(concat_ws(', ',
                        case when h.declared_cpu > h.allowed_cpu then 'cpu' end,
                        case when h.declared_memory > h.allowed_memory then 'memory' end,
                        case when not (h.allowed_labels @> h.declared_labels) then 'labels' end),
              '') as beyond_allowance,
       -- a draining or offline host: the services whose replicas still run
       -- there because no replacement runs elsewhere yet, and why
       case when h.state in ('draining', 'offline') then
         (select string_agg(format('%s: %s replica%s%s', w.formation, w.n,
                                   case when w.n = 1 then '' else 's' end,
                                   coalesce(' (' || w.why || ')', ' (replacement starting)')),
                            '; ' order by w.formation)
            from (select j.formation, count(*) as n,
                         (select min(p.error) from pgfleet.jobs p
                           where p.formation = j.formation and p.state = 'pending'
                             and p.desired_state = 'run' and p.error is not null) as why
                    from pgfleet.jobs j join pgfleet.formations f on f.name = j.formation
                   where j.host_id = h.id and j.state in ('assigned', 'running')
                     and j.desired_state = 'run' and f.kind = 'service'
                   group by j.formation) w)
       end as drain_waiting_for,
       lower(h.port_range) || '-' || (upper(h.port_range) - 1) as port_range,
       (select count(*) from pgfleet.job_ports p where p.host_id = h.id) as ports_held,
       h.networks,
       h.network_note
  from pgfleet.hosts h
  left join pgfleet.host_heartbeats hb on hb.host_id = h.id
  -- what its running attempts use now (pgfleet.job_usage), beside what they were given
  left join lateral (
    select round(sum(x.cpu_cores)::numeric, 2) as cpu_used, sum(x.memory_bytes) as memory_used_bytes,
           max(x.sampled_at) as usage_at
      from pgfleet.job_usage x
      join pgfleet.jobs j on j.id = x.job_id and j.attempt = x.attempt and j.host_id = x.host_id
                         and j.state = 'running'
     where x.host_id = h.id) u on true;
comment on view pgfleet.host_status is
  'Every host with its liveness (heartbeat age by the database clock), its condition (why it takes no new work, e.g. disk pressure), free resources and job counts; whether it is admitted (a host not admitted gets no jobs: pgfleet.admit_host), what it declares against what it is allowed, and beyond_allowance naming what it declares beyond (not offered); cpu_allocated (millicores) and memory_allocated (MiB) its jobs were given, cpu_used (cores) and memory_used_bytes they use now (hostd --usage-interval); drain_waiting_for, for a draining or offline host, the services whose replicas still run there because no replacement runs elsewhere yet, and why (their pending replacement''s reason); port_range (the ports its jobs may be given), ports_held (held by live attempts: pgfleet.job_ports), networks (what it offers its jobs) and network_note (why no bridge network).';

drop view if exists pgfleet.formation_status;
create view pgfleet.formation_status as
select f.id,
       f.name,
       f.kind,
       case when f.kind = 'service' then f.replicas
            when f.kind = 'system' then (select count(*) from pgfleet.system_hosts(f.id))
            -- a sysbatch formation: a run on each host it has run on since it
            -- was (re)created, and on each eligible host while not done
            when f.kind = 'sysbatch' then
              (select count(*) from (select p.pinned_host::text from pgfleet.jobs p
                                      where p.formation = f.name and p.pinned_host is not null
                                        and p.owner = f.owner and p.created_at >= f.created_at
                                     union
                                     select h from pgfleet.system_hosts(f.id) h
                                      where f.done_at is null) runs) end as desired,
       f.spread,
       count(j.id) filter (where j.state = 'pending') as pending,
       count(j.id) filter (where j.state = 'assigned') as assigned,
       count(j.id) filter (where j.state = 'running') as running,
       count(j.id) filter (where j.state = 'succeeded') as succeeded,
       count(j.id) filter (where j.state = 'failed') as failed,
       count(j.id) filter (where j.state = 'cancelled') as cancelled,
       -- live replicas by what their health checks found (jobs.health)
       count(j.id) filter (where j.state in ('assigned', 'running') and j.health = 'healthy') as healthy,
       count(j.id) filter (where j.state in ('assigned', 'running') and j.health = 'unhealthy') as unhealthy,
       f.health_check is not null as health_checked,
       f.done_at,
       f.version,
       (select r.state from pgfleet.rollouts r where r.formation_id = f.id
         order by r.id desc limit 1) as rollout,
       -- a cron formation's schedule, and its latest run (jobs_formation_due_at_key)
       f.cron, f.time_zone, f.overlap, f.catch_up, f.next_due_at, f.last_due_at,
       (select jsonb_build_object('job', c.id, 'due_at', c.due_at, 'state', c.state)
          from pgfleet.jobs c where f.kind = 'cron' and c.formation = f.name and c.due_at is not null
         order by c.due_at desc limit 1) as last_run
  from pgfleet.formations f
  left join pgfleet.jobs j on j.formation = f.name
 where f.deleted_at is null
 group by f.id, f.name, f.kind, f.replicas, f.spread, f.health_check, f.done_at, f.created_at, f.version,
          f.cron, f.time_zone, f.overlap, f.catch_up, f.next_due_at, f.last_due_at;
comment on view pgfleet.formation_status is
  'Per formation in use (not deleted): desired (a service''s replicas; a system formation''s eligible hosts; a sysbatch formation''s runs: the hosts it has run on, and while not done every eligible host; null for batch), its spread (null: packed), jobs by state, of its live (assigned or running) replicas how many are healthy and unhealthy (jobs.health), health_checked (whether its template has a health check), done_at (a sysbatch formation marked done: pgfleet.formation_done), its version and the state of its latest rollout (pgfleet.rollout_status; null: none); a cron formation''s cron, time_zone, overlap, catch_up, next_due_at (its next run), last_due_at (the latest due time handled, run or skipped) and last_run (its latest job: id, due_at, state).';

drop view if exists pgfleet.cluster_summary;
create view pgfleet.cluster_summary as
select (select count(*) from pgfleet.host_status where state = 'up' and alive and admitted) as hosts_up,
       (select count(*) from pgfleet.hosts) as hosts_total,
       (select coalesce(sum(cpu), 0) from pgfleet.hosts where state = 'up' and admitted) as cpu_total,
       (select coalesce(sum(cpu_allocated), 0) from pgfleet.hosts) as cpu_allocated,
       (select coalesce(sum(memory), 0) from pgfleet.hosts where state = 'up' and admitted) as memory_total,
       (select coalesce(sum(memory_allocated), 0) from pgfleet.hosts) as memory_allocated,
       (select count(*) from pgfleet.jobs where state = 'pending') as jobs_pending,
       (select count(*) from pgfleet.jobs where state = 'assigned') as jobs_assigned,
       (select count(*) from pgfleet.jobs where state = 'running') as jobs_running,
       (select count(*) from pgfleet.jobs where state = 'succeeded') as jobs_succeeded,
       (select count(*) from pgfleet.jobs where state = 'failed') as jobs_failed,
       (select count(*) from pgfleet.jobs where state = 'cancelled') as jobs_cancelled,
       (select count(*) from pgfleet.schedulers where last_seen > now() - interval '30 seconds') as schedulers,
       g.held_since as host_loss_held_since,
       g.held_hosts as host_loss_held_hosts,
       g.waiting_for_rate as hosts_waiting_for_loss_rate
  from pgfleet.host_loss_guard_status() g;
comment on view pgfleet.cluster_summary is
  'One row: hosts, capacity and jobs by state across the cluster, and the lost-host guard (pgfleet.host_loss_guard): since when a mass loss is held, how many silent hosts it holds, how many wait for the loss rate limit.';

drop view if exists pgfleet.settings_in_force;
create view pgfleet.settings_in_force as
select r.name, coalesce(s.value, r.default_value) as value, s.value is not null as set,
       r.default_value, r.kind, r.min_value, r.max_value, r.description
  from pgfleet.setting_rules() r
  left join pgfleet.settings s on s.name = r.name
 order by r.name;
comment on view pgfleet.settings_in_force is
  'Every setting with the value in force (its pgfleet.settings row, else the default), its rule and its meaning.';

drop view if exists pgfleet.allocation_drift;
create view pgfleet.allocation_drift as
select h.id as host_id, h.cpu_allocated, coalesce(s.cpu, 0) as cpu_of_live_jobs,
       h.memory_allocated, coalesce(s.memory, 0) as memory_of_live_jobs
  from pgfleet.hosts h
  left join (select host_id, sum(cpu) as cpu, sum(memory) as memory from pgfleet.jobs
              where state in ('assigned', 'running') group by host_id) s on s.host_id = h.id
 where h.cpu_allocated <> coalesce(s.cpu, 0) or h.memory_allocated <> coalesce(s.memory, 0);
comment on view pgfleet.allocation_drift is
  'Hosts whose allocated resources differ from the sum over their assigned and running jobs. Always empty unless something is wrong.';

drop view if exists pgfleet.formation_locks;
create view pgfleet.formation_locks as
select * from pgfleet.formation_lock_holders();
comment on view pgfleet.formation_locks is
  'Who holds each formation''s scheduling lock now (pgfleet.formation_lock_holders): a holder that is not a scheduler (is_scheduler false) freezes the formation; pgfleet.release_formation_lock ends it.';
