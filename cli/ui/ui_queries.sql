-- The dashboard's statements (cli/ui/ui_store.cpp), read-only, each returning
-- one JSON document as text. They read the views every role may see
-- (pgfleet.visible_jobs, host_status, formation_status, cluster_summary,
-- rollout_status) and pgfleet.job_events, so row-level security decides what
-- a login sees: a submitter its own jobs and their events, a reader every job
-- with env masked.

-- name: ui_summary
select to_jsonb(c)::text as doc from pgfleet.cluster_summary c;

-- name: ui_hosts
select coalesce(json_agg(json_build_object(
         'id', h.id, 'state', h.state, 'alive', h.alive, 'heartbeat_age_s', h.heartbeat_age_s,
         'suspended', coalesce(h.suspended, false), 'condition', h.condition,
         'admitted', h.admitted, 'beyond_allowance', h.beyond_allowance,
         'drain_waiting_for', h.drain_waiting_for, 'network_note', h.network_note,
         'cpu', h.cpu, 'cpu_free', h.cpu_free, 'cpu_allocated', h.cpu_allocated,
         'memory', h.memory, 'memory_free', h.memory_free, 'memory_allocated', h.memory_allocated,
         'cpu_used', h.cpu_used, 'memory_used_bytes', h.memory_used_bytes,
         'running_jobs', h.running_jobs, 'assigned_jobs', h.assigned_jobs,
         'labels', h.labels, 'driver', h.driver, 'driver_note', h.driver_note)
         order by h.id), '[]')::text as doc
  from pgfleet.host_status h;

-- name: ui_formations
-- Every formation in use with its latest rollout (null when it never had one).
select coalesce(json_agg(to_jsonb(f) || jsonb_build_object('latest_rollout', (
         select to_jsonb(r) from pgfleet.rollout_status r
          where r.formation = f.name order by r.rollout desc limit 1))
         order by f.name), '[]')::text as doc
  from pgfleet.formation_status f;

-- name: ui_jobs
-- $1 state, $2 formation, $3 host, $4 owner ('' = any), $5 the newest so many;
-- no state given: every job, final ones too.
select coalesce(json_agg(x order by x.id desc), '[]')::text as doc from (
  select j.id, j.formation, j.state, j.desired_state, j.attempt, j.host_id, j.owner, j.cpu,
         j.memory, j.created_at, j.started_at, j.finished_at, j.command, j.exit_code,
         j.signal, j.error, case when j.health_check is null then null else j.health end as health,
         j.cpu_used, j.memory_used_bytes
    from pgfleet.visible_jobs j
   where ($1::text = '' or j.state = $1::text) and ($2::text = '' or j.formation = $2::text)
     and ($3::text = '' or j.host_id = $3::text) and ($4::text = '' or j.owner = $4::text)
   order by j.id desc limit $5::integer) x;

-- name: ui_job
-- Job $1 (as pgfleet.visible_jobs shows it: env masked for readers) with its
-- attempts (where each was placed, how its last event left it) and events,
-- and the API of the host of its latest attempt; no row when the login may
-- not see it.
select (to_jsonb(j) || jsonb_build_object(
          'events', coalesce((select jsonb_agg(to_jsonb(e) order by e.id)
                                from pgfleet.job_events e where e.job_id = j.id), '[]'),
          'attempts', coalesce((select jsonb_agg(jsonb_build_object(
                                   'attempt', a.attempt, 'host_id', a.host_id, 'assigned_at', a.at,
                                   'last_event', (select l.kind from pgfleet.job_events l
                                                   where l.job_id = j.id and l.attempt = a.attempt
                                                   order by l.id desc limit 1),
                                   'last_detail', (select l.detail from pgfleet.job_events l
                                                    where l.job_id = j.id and l.attempt = a.attempt
                                                    order by l.id desc limit 1))
                                   order by a.attempt)
                                  from pgfleet.job_events a
                                 where a.job_id = j.id and a.kind = 'assigned'), '[]')))::text as doc,
       coalesce(h.api_url, '') as api_url
  from pgfleet.visible_jobs j left join pgfleet.hosts h on h.id = j.host_id
 where j.id = $1;

-- name: ui_fingerprint
-- What changes when a job changes state (every change writes a job event) or
-- a host comes, goes or changes state: polled once a second by the server.
select coalesce((select max(id) from pgfleet.job_events), 0)::text || '/' ||
       coalesce((select md5(string_agg(id || ':' || state || ':' || admitted::text, ','
                                       order by id)) from pgfleet.hosts), '') as fingerprint;
