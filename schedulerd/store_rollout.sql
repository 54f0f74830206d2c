-- schedulerd's statements for rollouts (schedulerd/store_rollout.cpp), each
-- run inside a formation's pass, holding its lock (sql/022_versions.sql).

-- name: schedulerd_active_rollout
-- Formation $1's rollout in progress (none: no row): what the pure step
-- needs, whether its progress deadline has passed, and how many of the
-- formation's replicas are being stopped but still hold a place.
select r.id, r.to_version, r.state, r.canary, r.promoted_at is not null as promoted,
       f.max_parallel::text as max_parallel, r.healthy,
       r.state <> 'waiting_promotion' and now() > r.progress_at + f.progress_deadline as past_deadline,
       f.progress_deadline::text as progress_deadline,
       (select count(*) from pgfleet.jobs j
         where j.formation = f.name and j.desired_state = 'stop'
           and j.state in ('assigned', 'running'))::integer as stopping
  from pgfleet.rollouts r join pgfleet.formations f on f.id = r.formation_id
 where r.formation_id = $1 and r.finished_at is null
 order by r.id desc
 limit 1;

-- name: schedulerd_rollout_progress
-- $1 rollout, $2 state, $3 updated, $4 healthy, $5 message ('' = none).
select pgfleet.rollout_progress($1, $2, $3, $4, nullif($5, ''));

-- name: schedulerd_finish_rollout
-- $1 rollout, $2 updated, $3 healthy.
select pgfleet.finish_rollout($1, $2, $3);

-- name: schedulerd_fail_rollout
-- $1 rollout, $2 why. The version reverted to (null: none).
select pgfleet.fail_rollout($1, $2) as reverted_to;
