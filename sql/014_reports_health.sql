-- Health reports from hosts (hostd/health/): the step of report_jobs
-- (sql/014_reports.sql) that applies a batch's changes of health.

-- A batch's health reports (hostd sends one when an attempt's health
-- changes: hostd/health/), applied before the rest of the batch, in one
-- statement: lock the live attempts they name in id order, then write each
-- attempt's last health report of the batch only where it changes the job's
-- health, with a 'health' event quoting the check's output. A report of an
-- attempt that is not the job's current one on this host (or of another
-- uid) changes nothing and is refused; one that changes nothing writes
-- nothing and is accepted, so a fleet whose health holds costs no writes.
-- It takes no host row: applied first, it keeps the lock order (jobs before
-- hosts) of the steps after it.
create or replace function pgfleet.apply_health_reports(
  p_host text, p_reports jsonb,
  out job_ids bigint[], out attempts integer[], out kinds text[], out accepted boolean[],
  out changed_jobs bigint[])
language plpgsql as $$
#variable_conflict use_column
begin
  with r as (
    select t.n, (t.e ->> 'job')::bigint as job, (t.e ->> 'attempt')::integer as att,
           t.e ->> 'health' as health, t.e ->> 'uid' as uid,
           -- at most 4096 bytes (hostd cuts it so; a longer one is cut here)
           case when octet_length(t.e ->> 'output') <= 4096 then t.e ->> 'output'
                else left(t.e ->> 'output', 1024) end as output
      from jsonb_array_elements(p_reports) with ordinality t(e, n)
  ),
  last_report as (  -- an attempt's last health report of the batch says how it is now
    select distinct on (r.job, r.att) r.* from r order by r.job, r.att, r.n desc
  ),
  live as (  -- the attempts they name that are current here, locked in id order
    select j.id, j.attempt
      from last_report l
      cross join lateral (
        select j.id, j.attempt, j.host_id, j.state, j.uid from pgfleet.jobs j
         where j.id = l.job offset 0) j
     where j.attempt = l.att and j.host_id = p_host and j.state in ('assigned', 'running')
       and pgfleet.report_names_job(l.uid, j.uid)
     order by j.id
       for update of j
  ),
  written as (
    update pgfleet.jobs j
       set health = l.health, health_at = now(), health_output = l.output
      from last_report l
     where j.id = any (array(select v.id from live v))
       and j.id = l.job and j.attempt = l.att and j.host_id = p_host
       and j.state in ('assigned', 'running') and pgfleet.report_names_job(l.uid, j.uid)
       and j.health is distinct from l.health
    returning j.id, j.attempt, j.health, j.health_output
  ),
  events as (
    insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
    select w.id, w.attempt, 'health', p_host,
           w.health || coalesce(': ' || nullif(w.health_output, ''), '')
      from written w order by w.id
  )
  select array_agg(r.job order by r.n), array_agg(r.att order by r.n),
         array_agg('health'::text order by r.n),
         array_agg(exists (select 1 from live v where v.id = r.job and v.attempt = r.att)
                   order by r.n),
         (select array_agg(w.id) from written w)
    into job_ids, attempts, kinds, accepted, changed_jobs
    from r;
end $$;
comment on function pgfleet.apply_health_reports(text, jsonb) is
  'Step of pgfleet.report_jobs: applies a batch''s health reports from host p_host (each attempt''s last one) in one statement, writing jobs.health, health_at, health_output and a health event only where the health changes, and only for attempts current on this host; answers each report''s job, attempt, kind and acceptance in order, and the jobs changed.';
revoke execute on function pgfleet.apply_health_reports(text, jsonb) from public;
