-- Which services are failing?  psql -f sql/ops/failing_services.sql
-- Service formations with fewer live (assigned or running) replicas than
-- asked, unhealthy replicas, or replica attempts that failed in the last hour
-- (an attempt that failed and was retried: event `requeued` with its next
-- attempt's backoff; or `failed`; or `lost` with its host), with
-- the reason a pending replacement waits for and the latest rollout's state.
select s.name, s.desired, s.running + s.assigned as live, s.healthy, s.unhealthy,
       (select count(*) from pgfleet.job_events e join pgfleet.jobs j on j.id = e.job_id
         where j.formation = s.name and e.at > now() - interval '1 hour'
           and (e.kind in ('failed', 'lost')
                or (e.kind = 'requeued' and e.detail like '%next attempt in%'))) as failures_last_hour,
       (select min(p.error) from pgfleet.jobs p
         where p.formation = s.name and p.state = 'pending' and p.error is not null) as pending_reason,
       s.rollout
  from pgfleet.formation_status s
 where s.kind = 'service'
   and (s.running + s.assigned < s.desired or s.unhealthy > 0
        or exists (select 1 from pgfleet.job_events e join pgfleet.jobs j on j.id = e.job_id
                    where j.formation = s.name and e.at > now() - interval '1 hour'
                      and (e.kind in ('failed', 'lost')
                           or (e.kind = 'requeued' and e.detail like '%next attempt in%'))))
 order by s.name;
