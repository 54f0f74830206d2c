-- Why is a job pending?  psql -v job=42 -f sql/ops/why_pending.sql
select j.id, j.formation, j.state, j.attempt, j.cpu, j.memory, j.constraints, j.error as reason,
       j.not_before, (select count(*) from pgfleet.host_status h where h.state = 'up' and h.alive) as hosts_up
  from pgfleet.jobs j where j.id = :'job';
