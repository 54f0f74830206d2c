-- What sql/ did on every migrate that belongs to one upgrade (issue 35):
-- sql/ now holds only current definitions. Migrations run before sql/, so
-- each old function below is gone before sql/ creates the current one.

-- Old signatures of functions sql/ defines anew, each dropped before sql/
-- makes the current one: an old overload would make calls ambiguous where
-- the new one takes its arguments plus some with defaults, and a function's
-- result columns change only by dropping it. (migrate drops whatever else
-- sql/ no longer defines once sql/ ran.)
-- privilege_problem before seccomp; limit_problem before the disk and log
-- ceilings, then before role_limits (p_owner); submit before disk, then
-- before seccomp.
drop function if exists pgfleet.privilege_problem(text, text, text);
drop function if exists pgfleet.limit_problem(integer, integer);
drop function if exists pgfleet.limit_problem(integer, integer, integer, integer, integer);
drop function if exists pgfleet.submit(text[], text, integer, integer, jsonb, jsonb, integer,
                                       integer, text, text, text, text, integer, boolean, integer);
drop function if exists pgfleet.submit(text[], text, integer, integer, jsonb, jsonb, integer,
                                       integer, text, text, text, text, integer, boolean, integer,
                                       integer);
-- The three-argument heartbeat, before the host's condition; the
-- four-argument one, before live usage; the five-argument one whose answer
-- had no live_digest and stops.
drop function if exists pgfleet.heartbeat(text, bigint, integer);
drop function if exists pgfleet.heartbeat(text, bigint, integer, text);
drop function if exists pgfleet.heartbeat(text, bigint, integer, text, jsonb);
-- assign_jobs once returned job_id, attempt and host_id only (the spec and
-- uid came with the scheduler's claim).
do $$
begin
  if exists (select 1 from pg_proc p
              where p.oid = to_regprocedure('pgfleet.assign_jobs(jsonb)')
                and not ('spec' = any (p.proargnames))) then
    drop function pgfleet.assign_jobs(jsonb);
  end if;
end $$;
-- The per-report steps of earlier versions (one UPDATE per report,
-- docs/decisions/0003), before report_jobs applied a batch set-based;
-- report_jobs before p_wake (the same calls reach the new one through its
-- default), and before its wake_schedulers column.
drop function if exists pgfleet.report_running(pgfleet.jobs, text, integer);
drop function if exists pgfleet.report_exit(pgfleet.jobs, text, jsonb);
drop function if exists pgfleet.report_lost(pgfleet.jobs, text, text);
drop function if exists pgfleet.report_jobs(text, bigint, jsonb);
do $$
begin
  if exists (select 1 from pg_proc p
              where p.oid = to_regprocedure('pgfleet.report_jobs(text, bigint, jsonb, boolean)')
                and not ('wake_schedulers' = any (p.proargnames))) then
    drop function pgfleet.report_jobs(text, bigint, jsonb, boolean);
  end if;
end $$;

-- Defaults that depend on who inserts (migration 0005 made them current_user,
-- false and 'host'). Inserts run as the caller (no SECURITY DEFINER function
-- inserts jobs), so current_user is the caller here; and built-in calls, not
-- SQL functions, because a default is evaluated once per row
-- (docs/decisions/0005). sql/090_security.sql makes the schema's owner
-- a member of pgfleet_privileged so that these agree with
-- pgfleet.caller_privileged().
alter table pgfleet.jobs
  alter column owner set default current_user,
  alter column privileged set default pg_has_role('pgfleet_privileged', 'member'),
  alter column network set default
    case when pg_has_role('pgfleet_privileged', 'member') then 'host' else 'none' end;
alter table pgfleet.formations
  alter column owner set default current_user,
  alter column privileged set default pg_has_role('pgfleet_privileged', 'member'),
  alter column network set default
    case when pg_has_role('pgfleet_privileged', 'member') then 'host' else 'none' end;
