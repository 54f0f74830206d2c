-- Who uses the most of the cluster?  psql -f sql/ops/top_users.sql
-- Per owner (jobs.owner, the role that submitted): what their assigned and
-- running jobs were given (cpu in millicores, memory in MiB) and what those
-- use now (pgfleet.job_usage, sampled by hostd), and how much work waits.
select j.owner,
       count(*) filter (where j.state in ('assigned', 'running')) as live_jobs,
       count(*) filter (where j.state = 'pending') as pending_jobs,
       coalesce(sum(j.cpu) filter (where j.state in ('assigned', 'running')), 0) as cpu_given,
       coalesce(sum(j.memory) filter (where j.state in ('assigned', 'running')), 0) as memory_given,
       round(sum(u.cpu_cores)::numeric, 2) as cpu_cores_used,
       pg_size_pretty(sum(u.memory_bytes)::bigint) as memory_used
  from pgfleet.jobs j
  left join pgfleet.job_usage u
    on u.job_id = j.id and u.attempt = j.attempt and u.host_id = j.host_id and j.state = 'running'
 where j.state in ('pending', 'assigned', 'running')
 group by j.owner
 order by cpu_given desc, memory_given desc;
