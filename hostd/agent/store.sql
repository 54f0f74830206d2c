-- hostd's statements (store.cpp): register, heartbeat, report batches and
-- the jobs a host holds, prepared on every connection by store::Prepare (or
-- sent unnamed behind a pooler, db::UseUnnamedStatements). Each block is a
-- db::Statement constant k<Name> (cmake/embed_queries.cmake).

-- name: hostd_register_host
select pgfleet.register_host($1, $2, $3, $4, $5::jsonb, $6, $7, int4range($8, $9, '[]'),
                             $10::text[], nullif($11, '')) as generation;

-- name: hostd_set_host_key
select pgfleet.set_host_key($1, $2);

-- name: hostd_host_ttl
select extract(epoch from pgfleet.host_ttl())::float8 as seconds;

-- name: hostd_heartbeat
-- The host state is compared here, in SQL, where host states are defined.
select state, state = 'lost' as lost, generation,
       live_digest, stops
  from pgfleet.heartbeat($1, $2, $3, $4, $5::jsonb);

-- name: hostd_report_jobs
-- Without report_jobs' own wake: hostd wakes the schedulers after the commit
-- (WakeSchedulers), when the batch says one sleeps, so that its report
-- commits hold no NOTIFY lock; with each running report's start latency
-- (pgfleet.report_jobs_timed).
select job_id, attempt, kind, accepted, wake_schedulers, since_insert
  from pgfleet.report_jobs_timed($1, $2, $3::jsonb);

-- name: hostd_wake_schedulers
select pgfleet.wake_schedulers(array[pgfleet.all_formations()]);

-- name: hostd_host_jobs
-- The spec only of an assigned job (reconcile starts one whose dispatch never
-- came from it): a running job's, its files up to 1 MiB, is not read again
-- every reconcile.
select j.id, j.attempt, j.state, j.desired_state = 'stop' as stop_wanted, j.stop_force,
       case when j.state = 'assigned' then pgfleet.job_spec_json(j)::text else '' end as spec,
       coalesce(j.uid::text, '') as uid
  from pgfleet.host_jobs($1) j;

-- name: hostd_report_rootfs_warm
-- Only when the set changed since hostd last wrote it (Agent::ReportRootfsIfChanged).
select pgfleet.report_rootfs_warm($1, $2, $3::text[]);
