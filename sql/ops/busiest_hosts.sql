-- Which hosts are fullest?  psql -f sql/ops/busiest_hosts.sql
-- Hosts by allocated share of their capacity (cpu and memory given to jobs).
select id, state, alive, running_jobs,
       round(100.0 * (cpu - cpu_free) / cpu, 1) as cpu_pct,
       round(100.0 * (memory - memory_free) / memory, 1) as memory_pct
  from pgfleet.host_status order by greatest((cpu - cpu_free)::float / cpu, (memory - memory_free)::float / memory) desc;
