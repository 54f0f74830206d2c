-- What operators see of preemption (migration 0039, docs/preemption.md):
-- the jobs being stopped now to make room, and for whom. Granted here,
-- after 090_security.sql revoked every table's grants.

drop view if exists pgfleet.preemptions;
create view pgfleet.preemptions as
select v.id as job_id, v.formation, v.priority, v.host_id, v.state, v.attempt,
       p.id as for_job, p.formation as for_formation, p.priority as for_priority,
       p.state as for_state
  from pgfleet.jobs v join pgfleet.jobs p on p.id = v.preempted_by
 where v.preempted_by is not null and v.state in ('assigned', 'running');
comment on view pgfleet.preemptions is
  'Jobs being stopped to make room for a job of higher priority (jobs.preempted_by): each victim (job_id, its formation, priority, host, state, attempt) and the job it makes room for (for_job, for_formation, for_priority, for_state). Empty when nothing is being preempted; the story of past preemptions is in job_events (stop_requested and preempting, requeued).';
grant select on pgfleet.preemptions to pgfleet_operator, pgfleet_reader, pgfleet_scheduler;
