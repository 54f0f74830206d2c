-- schedulerd's statements for preemption (schedulerd/store_preemption.cpp),
-- run inside a formation's pass, holding its lock, only when a pending job
-- of the formation found no host (sql/024_preemption.sql,
-- docs/preemption.md): a pass that places everything runs none of them.

-- name: schedulerd_preemption_candidates
-- The jobs that could be stopped for a job of priority $1: assigned or
-- running, wanted, preemptible, of lower priority, on a host taking work
-- (pgfleet.preempt checks each again under a lock).
select j.id, j.host_id, j.cpu, j.memory, j.priority, j.formation
  from pgfleet.jobs j join pgfleet.hosts h on h.id = j.host_id
 where j.state in ('assigned', 'running') and j.desired_state = 'run' and j.preemptible
   and j.priority < $1 and h.state = 'up' and h.admitted;

-- name: schedulerd_preemption_budgets
-- How many more running jobs each formation of $1 with a min_available may
-- lose (formations without one are not listed: no limit).
select f.name, greatest(0, (select count(*) from pgfleet.jobs j
                             where j.formation = f.name and j.state = 'running'
                               and j.desired_state = 'run') - f.min_available)::integer as may_lose
  from pgfleet.formations f
 where f.name = any($1::text[]) and f.min_available is not null;

-- name: schedulerd_waiting_for_victims
-- Which jobs of $1 still wait for victims of their last preemption to stop.
select p.id from pgfleet.jobs p
 where p.id = any($1::bigint[]) and p.preempting is not null
   and exists (select 1 from pgfleet.jobs v
                where v.id = any(p.preempting) and v.preempted_by = p.id
                  and v.state in ('assigned', 'running'));

-- name: schedulerd_preempt
-- $1 job, $2 host, $3 victims: how many were stopped (0: refused).
select pgfleet.preempt($1, $2, $3::bigint[]) as stopped;
