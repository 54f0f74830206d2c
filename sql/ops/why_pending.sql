-- Why is a job pending?  psql -v job=42 -f sql/ops/why_pending.sql
-- reason: what the scheduler found (a job deep in a busy queue that only
-- waits its turn for capacity has none: schedulers write it for the first 32
-- jobs of a formation's queue); ahead: pending jobs of its formation placed
-- before it (higher priority, or the same and older).
select j.id, j.formation, j.state, j.attempt, j.cpu, j.memory, j.constraints, j.error as reason,
       (select count(*) from pgfleet.jobs p
         where j.state = 'pending' and p.formation = j.formation and p.state = 'pending'
           and p.desired_state = 'run'
           and (p.priority > j.priority or p.priority = j.priority and p.id < j.id)) as ahead,
       j.not_before, (select count(*) from pgfleet.host_status h where h.state = 'up' and h.alive) as hosts_up
  from pgfleet.jobs j where j.id = :'job';
