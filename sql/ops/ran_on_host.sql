-- What ran on host X in the last hour?  psql -v host=host-1 -f sql/ops/ran_on_host.sql
-- Every attempt that was assigned to, ran on, or ended on the host since an
-- hour ago (pgfleet.job_events), with its job's formation, owner and state
-- now, when it started and ended on that host, and how it ended. Jobs pruned
-- since (--retain) are gone with their events.
select e.job_id, e.attempt, j.formation, j.owner, j.command,
       min(e.at) filter (where e.kind in ('assigned', 'running')) as started,
       max(e.at) filter (where e.kind not in ('assigned', 'running')) as ended,
       (array_agg(e.kind order by e.id desc))[1] as last_event,
       j.state as job_state_now, j.exit_code
  from pgfleet.job_events e
  join pgfleet.jobs j on j.id = e.job_id
 where e.host_id = :'host' and e.at > now() - interval '1 hour'
 group by e.job_id, e.attempt, j.formation, j.owner, j.command, j.state, j.exit_code
 order by started nulls last, e.job_id, e.attempt;
