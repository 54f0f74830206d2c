-- Which formations start slowest?  psql -f sql/ops/slowest_starting.sql
-- Per formation, over the jobs that started in the last hour: how many, and
-- the median, 95th percentile and worst time from insert to assignment and
-- from insert to running (jobs.created_at, assigned_at, started_at; a
-- retried job counts from its insert, so its backoff is in it).
select j.formation, count(*) as started,
       round(extract(epoch from percentile_cont(0.5) within group (order by j.assigned_at - j.created_at))::numeric * 1000, 1) as assign_p50_ms,
       round(extract(epoch from percentile_cont(0.5) within group (order by j.started_at - j.created_at))::numeric * 1000, 1) as run_p50_ms,
       round(extract(epoch from percentile_cont(0.95) within group (order by j.started_at - j.created_at))::numeric * 1000, 1) as run_p95_ms,
       round(extract(epoch from max(j.started_at - j.created_at))::numeric * 1000, 1) as run_max_ms
  from pgfleet.jobs j
 where j.started_at > now() - interval '1 hour' and j.assigned_at is not null
 group by j.formation
 order by run_p95_ms desc nulls last;
