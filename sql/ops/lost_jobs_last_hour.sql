-- Which attempts were lost or requeued in the last hour?  psql -f sql/ops/lost_jobs_last_hour.sql
-- Attempts lost with their host, or requeued, in the last hour.
select e.job_id, e.attempt, e.kind, e.host_id, e.at, e.detail
  from pgfleet.job_events e
 where e.kind in ('lost', 'requeued') and e.at > now() - interval '1 hour'
 order by e.at desc;
