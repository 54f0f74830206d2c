-- The CLI's statements (queries.cpp), prepared by PrepareQueries on its
-- connection. Each block is a db::Statement constant k<Name>
-- (cmake/embed_queries.cmake).

-- name: cli_submit
select pgfleet.submit(command => $1::text[], formation => $2::text, cpu => $3::integer,
                      memory => $4::integer, env => $5::jsonb, constraints => $6::jsonb,
                      priority => $7::integer, max_attempts => $8::integer,
                      idempotency_key => $9::text, rootfs => $10::text, run_as => $11::text,
                      network => $12::text, pids_max => $13::integer,
                      cpu_hard_limit => $14::boolean, stop_grace_seconds => $15::integer,
                      disk => $16::integer, seccomp => $17::text,
                      health_check => $18::jsonb, ports => $19::jsonb,
                      -- $21 a time (--at), else $22 seconds from now (--in)
                      after => $20::bigint[],
                      not_before => coalesce($21::timestamptz,
                                             now() + make_interval(secs => $22::float8)),
                      files => $23::jsonb, preemptible => $24::boolean)
       as id;

-- name: cli_start_time
-- $1 as PostgreSQL reads a timestamptz (an error for text it cannot read).
select t::text as text, isfinite(t) as finite,
       case when isfinite(t) then extract(epoch from t - now())::float8 end as seconds_from_now
  from (select $1::timestamptz as t) x;

-- name: cli_job_progress
select j.state, j.attempt, coalesce(j.host_id, '') as host_id,
       coalesce(h.api_url, '') as api_url, j.exit_code, j.signal, j.output_tail, j.error
  from pgfleet.visible_jobs j left join pgfleet.hosts h on h.id = j.host_id
 where j.id = $1;

-- name: cli_watch_jobs
select pgfleet.watch_jobs($1::bigint[]);

-- name: cli_unwatch_jobs
select pgfleet.unwatch_jobs();

-- name: cli_waited_jobs
select j.id, j.state, j.attempt, coalesce(j.host_id, '') as host_id, j.exit_code,
       j.signal, j.error,
       -- (a job waiting for others has not_before infinity: nothing to count down)
       case when isfinite(j.not_before)
            then greatest(extract(epoch from j.not_before - now()), 0) else 0 end::double precision
         as retry_in
  from pgfleet.visible_jobs j where j.id = any($1::bigint[]) order by j.id;

-- name: cli_log_ticket
select ticket from pgfleet.log_ticket($1, $2);

-- name: cli_host_ticket
select host_id, coalesce(api_url, '') as api_url, attempt, ticket
  from pgfleet.host_ticket($1, $2, nullif($3, 0));

-- name: cli_attempt_host
select e.host_id, coalesce(h.api_url, '') as api_url
  from pgfleet.job_events e left join pgfleet.hosts h on h.id = e.host_id
 where e.job_id = $1 and e.attempt = $2 and e.kind = 'assigned' and e.host_id is not null
 order by e.id limit 1;

-- name: cli_list_jobs
select j.id, j.formation, j.state, j.attempt, coalesce(j.host_id, '') as host_id, j.cpu,
       j.memory, to_char(j.created_at, 'YYYY-MM-DD HH24:MI:SS') as created,
       array_to_string(j.command, ' ') as command,
       -- a delayed start not due yet says when (jobs.not_before)
       coalesce(j.error, case when j.state = 'pending' and isfinite(j.not_before) and j.not_before > now()
                              then 'starts at ' || to_char(j.not_before, 'YYYY-MM-DD HH24:MI:SS') end,
                '') as error,
       coalesce(to_char(j.cpu_used, 'FM9999990.00'), '') as cpu_used,
       coalesce(round(j.memory_used_bytes / 1048576.0, 1) || 'Mi', '') as memory_used,
       -- a job without a health check has no health to show
       case when j.health_check is null then '' else j.health end as health,
       -- (files, up to 1 MiB a job, only in `inspect`)
       (to_jsonb(j) - 'files')::text as doc
  from pgfleet.visible_jobs j
 where ($1::boolean or $4::text <> '' or j.state in ('pending', 'assigned', 'running'))
   and ($2::text = '' or j.formation = $2::text)
   and ($4::text = '' or j.state = $4::text)
   and ($5::double precision = 0
        or j.created_at > now() - make_interval(secs => $5::double precision))
   and ($6::text = '' or j.host_id = $6::text)
 order by j.id desc limit $3;

-- name: cli_job_document
select to_jsonb(j)::text as doc from pgfleet.visible_jobs j where j.id = $1;

-- name: cli_job_events
select coalesce(json_agg(e order by e.id), '[]')::text as doc
  from pgfleet.job_events e where e.job_id = $1;

-- name: cli_cancel
select pgfleet.cancel($1) as result;

-- name: cli_force_stop
select pgfleet.force_stop($1) as result;

-- name: cli_list_events
select * from (
  select e.id, to_char(e.at, 'YYYY-MM-DD HH24:MI:SS.MS') as at, e.job_id, e.attempt, e.kind,
         coalesce(e.host_id, '') as host_id, coalesce(e.detail, '') as detail,
         to_jsonb(e)::text as doc
    from pgfleet.job_events e
   where ($1::bigint = 0 or e.job_id = $1::bigint) and e.id > $2
   order by e.id desc limit $3) x
 order by x.id;

-- name: cli_list_hosts
select h.id,
       case when h.state = 'up' and not h.alive then 'up (heartbeat late)' else h.state end
         || case when coalesce(h.suspended, false) then ' (suspended)' else '' end
         || coalesce(' (' || split_part(h.condition, ':', 1) || ')', '')
         || case when h.admitted then '' else ' (not admitted)' end
         || coalesce(' (declares ' || h.beyond_allowance || ' beyond its allowance)', '')
         || coalesce(' (waits for ' || h.drain_waiting_for || ')', '')
         as shown_state,
       coalesce(h.condition, h.network_note, '') as condition,
       coalesce(h.heartbeat_age_s::text, '-') as heartbeat_age,
       h.cpu_free || '/' || h.cpu || 'm' as cpu,
       h.memory_free || '/' || h.memory || 'Mi' as memory, h.running_jobs,
       coalesce(to_char(h.cpu_used, 'FM9999990.00'), '') as cpu_used,
       coalesce(round(h.memory_used_bytes / 1048576.0, 1) || 'Mi', '') as memory_used,
       h.labels::text as labels, h.driver, coalesce(h.driver_note, '') as driver_note,
       h.api_url, to_jsonb(h)::text as doc
  from pgfleet.host_status h order by h.id;

-- name: cli_drain
select pgfleet.drain($1, make_interval(secs => $2::float8));

-- name: cli_set_host_state
select pgfleet.set_host_state($1, $2);

-- name: cli_cluster_summary
select to_jsonb(c)::text as doc from pgfleet.cluster_summary c;

-- name: cli_formation_statuses
select to_jsonb(f)::text as doc from pgfleet.formation_status f order by f.name;

-- name: cli_scale
select pgfleet.scale($1, $2);

-- name: cli_create_formation
insert into pgfleet.formations (name, kind, replicas, command, env, cpu, memory,
                                constraints, priority, rootfs, run_as, network, pids_max,
                                cpu_hard_limit, stop_grace_seconds, disk, seccomp, spread,
                                max_attempts, health_check, ports,
                                cron, time_zone, overlap, catch_up, files)
 values ($1, $2, $3, nullif($4::text[], '{}'), $5::jsonb, $6, $7, $8::jsonb, $9, $10, $11,
         coalesce($12, pgfleet.default_network()), $13, $14, $15, $16, $17, $18, $19, $20::jsonb,
         $21::jsonb, $22, $23, $24, $25, $26::jsonb)
 -- A deleted formation of that name (kept for its jobs' history) comes back,
 -- created anew: a sysbatch formation runs again on every host, not done.
 on conflict (name) do update set
   kind = excluded.kind, replicas = excluded.replicas, command = excluded.command,
   env = excluded.env, cpu = excluded.cpu, memory = excluded.memory,
   constraints = excluded.constraints, priority = excluded.priority,
   rootfs = excluded.rootfs, run_as = excluded.run_as, network = excluded.network,
   pids_max = excluded.pids_max, cpu_hard_limit = excluded.cpu_hard_limit,
   stop_grace_seconds = excluded.stop_grace_seconds, disk = excluded.disk,
   seccomp = excluded.seccomp, spread = excluded.spread, max_attempts = excluded.max_attempts,
   health_check = excluded.health_check, ports = excluded.ports, files = excluded.files,
   cron = excluded.cron, time_zone = excluded.time_zone, overlap = excluded.overlap,
   catch_up = excluded.catch_up, last_due_at = null, next_due_at = null,
   deleted_at = null, done_at = null, created_at = now(), updated_at = now()
   where pgfleet.formations.deleted_at is not null
 returning id;

-- name: cli_formation_done
select pgfleet.formation_done($1)::text as done_at;

-- name: cli_delete_formation
select pgfleet.delete_formation($1) as result;

-- name: cli_remove_host
select pgfleet.remove_host($1);

-- name: cli_admit_host
select pgfleet.admit_host($1, $2::integer, $3::integer, $4::jsonb);

-- name: cli_update_formation
-- $1 formation, $2 an object of the columns to change (pgfleet.update_formation).
select pgfleet.update_formation($1, $2::jsonb) as version;

-- name: cli_formation_history
-- Formation $1's versions, newest first.
select v.version, v.created_at::text as created_at, v.created_by,
       array_to_string(v.changed, ',') as changed, coalesce(v.note, '') as note,
       v.healthy_at is not null as was_healthy, v.version = f.version as current,
       v.template::text as template
  from pgfleet.formation_versions v join pgfleet.formations f on f.id = v.formation_id
 where f.name = $1 and f.deleted_at is null
 order by v.version desc;

-- name: cli_revert
select pgfleet.revert($1, $2);

-- name: cli_promote
select pgfleet.promote($1);

-- name: cli_formation_status
-- Formation $1's row of pgfleet.formation_status (none: no such formation).
select to_jsonb(s)::text as doc from pgfleet.formation_status s where s.name = $1;

-- name: cli_rollouts
-- Formation $1's newest $2 rollouts (pgfleet.rollout_status), newest first.
select to_jsonb(s)::text as doc from pgfleet.rollout_status s
 where s.formation = $1 order by s.rollout desc limit $2;

-- name: cli_endpoints
-- $1: a formation, or '' for every one the caller may see.
select e.formation, e.job, e.attempt, e.host, coalesce(e.address, '') as address,
       coalesce(e.port_name, '') as port_name, coalesce(e.port::text, '') as port,
       coalesce(host(e.job_address), '') as job_address, e.health, e.since::text as since,
       to_jsonb(e)::text as doc
  from pgfleet.endpoints e
 where $1 = '' or e.formation = $1
 order by e.formation, e.job, e.port_name;

-- name: cli_watch_endpoints
select pgfleet.watch_endpoints(nullif($1, ''));

-- name: cli_unwatch_endpoints
select pgfleet.unwatch_endpoints();

-- name: cli_owner_quotas
-- pgfleet.owner_quota_status as the caller may see it (a submitter: its own).
select to_jsonb(q)::text as doc from pgfleet.owner_quota_status q order by q.owner;

-- name: cli_placement_request
-- pgfleet plan: the placement core's view of one job (pgfleet.placement_request).
select to_jsonb(r)::text as doc from pgfleet.placement_request($1) r;

-- name: cli_placement_hosts
-- pgfleet plan: every host as a scheduler's snapshot would hold it, or why not.
select to_jsonb(h)::text as doc from pgfleet.placement_hosts($1, $2) h;

-- name: cli_preemption_candidates
-- pgfleet plan: the jobs a job of priority $1 could preempt (no ids: n).
select c.n, c.host_id, c.cpu, c.memory, c.priority, c.formation
  from pgfleet.preemption_candidates($1) c;

-- name: cli_preemption_budgets
-- pgfleet plan: how many more jobs each formation with a min_available may lose.
select b.formation, b.may_lose from pgfleet.preemption_budgets() b;
