-- Which hosts lose jobs, and how often?  psql -f sql/ops/lost_per_host_per_day.sql
-- Attempts lost with their host (event `lost`: the host stopped heartbeating
-- or was declared lost) and requeued (a dispatch or a drain sent them back),
-- per host and day, for the last 7 days (as far as --retain keeps events).
select e.host_id, date_trunc('day', e.at)::date as day,
       count(*) filter (where e.kind = 'lost') as lost,
       count(*) filter (where e.kind = 'requeued') as requeued
  from pgfleet.job_events e
 where e.kind in ('lost', 'requeued') and e.at > now() - interval '7 days'
 group by e.host_id, day
 order by day desc, lost desc, e.host_id;
