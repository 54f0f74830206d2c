-- Dependencies as a reader sees them (docs/dependencies.md): each job's
-- edges with the state of the job it needs, and a DAG walked up from its
-- last job. Built on visible_jobs (a security barrier), so row-level
-- security holds: a submitter sees its own jobs only, and a job it cannot
-- see shows as nothing but its id.

drop view if exists pgfleet.job_graph;
create view pgfleet.job_graph with (security_barrier = true) as
select j.id as job, j.state,
       j.state = 'pending' and coalesce(j.not_before = 'infinity', false) as waiting,
       j.error,
       a.needs, a.n::integer as position,
       d.state as needs_state, d.started_at as needs_started_at, d.finished_at as needs_finished_at,
       d.error as needs_error
  from pgfleet.visible_jobs j
  cross join lateral unnest(j.after) with ordinality a(needs, n)
  left join pgfleet.visible_jobs d on d.id = a.needs;
comment on view pgfleet.job_graph is
  'One row per dependency of every job the caller may see (jobs.after): the job, its state, whether it waits for its dependencies (pending with not_before infinity), its error (''waiting for job N'', or ''dependency job N failed: ...''), the job it needs (needs, at position in its after list) and that job''s state, start, end and error (null when the caller cannot see it or it was pruned).';

-- The DAG that leads to job p_job: the job and every job it needs,
-- transitively (each once, at its shortest depth from p_job), with their
-- state and times. What `pgfleet wait` on a DAG's last job waits for.
create or replace function pgfleet.job_dag(p_job bigint)
returns table (job bigint, depth integer, after bigint[], state text, waiting boolean,
               started_at timestamptz, finished_at timestamptz, error text)
language sql stable as $$
  with recursive up(id, depth) as (
    select j.id, 0 from pgfleet.visible_jobs j where j.id = p_job
    union
    select a.needs, up.depth + 1
      from up join pgfleet.visible_jobs j on j.id = up.id
      cross join lateral unnest(j.after) a(needs)
     where up.depth < 1000
  )
  select j.id, min(up.depth)::integer, j.after, j.state,
         j.state = 'pending' and coalesce(j.not_before = 'infinity', false), j.started_at, j.finished_at, j.error
    from up join pgfleet.visible_jobs j on j.id = up.id
   group by j.id, j.after, j.state, j.not_before, j.started_at, j.finished_at, j.error
   order by j.id
$$;
comment on function pgfleet.job_dag(bigint) is
  'Job p_job and every job it needs, transitively (jobs.after), as the caller may see them: id, depth (0 for p_job), after, state, waiting (for its dependencies), started_at, finished_at and error.';

grant select on pgfleet.job_graph
  to pgfleet_submitter, pgfleet_reader, pgfleet_scheduler, pgfleet_operator;
