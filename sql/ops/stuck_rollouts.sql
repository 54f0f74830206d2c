-- Which rollouts are stuck?  psql -f sql/ops/stuck_rollouts.sql
-- Rollouts not finished, with how long since they last made progress
-- (rollouts.progress_at) against the formation's progress_deadline, and
-- those waiting for an operator (waiting_promotion: pgfleet.promote).
select f.name as formation, r.id as rollout, r.state, r.from_version, r.to_version,
       r.updated, r.healthy, f.replicas,
       now() - r.progress_at as since_progress, f.progress_deadline,
       r.state = 'waiting_promotion' as waits_for_promote,
       now() - r.progress_at > f.progress_deadline as past_deadline,
       r.message
  from pgfleet.rollouts r
  join pgfleet.formations f on f.id = r.formation_id
 where r.finished_at is null
 order by since_progress desc;
