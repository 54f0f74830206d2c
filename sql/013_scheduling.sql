-- Scheduling: placement plans written all-or-nothing per host, why jobs stay
-- pending, dispatch outcomes, and the spec a host runs.

-- Whether the ports planned for one host are right and free: every job
-- gets exactly the names it asks for, a port 0 one of the host's
-- port_range, a number that very port (inside the range unless the job is
-- privileged), no port twice in the plan, and none held on the host now.
-- p_jobs: [{"asked": {...}, "given": {...}, "privileged": bool}]. The
-- schedulers' placement core plans by the same rules; this keeps the
-- database sure of them whoever writes a plan.
create or replace function pgfleet.ports_fit_host(p_host text, p_range int4range, p_jobs jsonb[])
returns boolean
language sql stable as $$
  with j as (
    select coalesce(x ->> 'privileged', 'false')::boolean as privileged,
           coalesce(x -> 'asked', '{}') as asked, coalesce(x -> 'given', '{}') as given
      from unnest(p_jobs) x
  ), g as (
    select j.privileged, a.key, a.value as asked, j.given -> a.key as given
      from j cross join lateral jsonb_each(j.asked) a
  )
  select
    -- the same names asked and given
    not exists (select 1 from j
                 where jsonb_typeof(j.asked) <> 'object' or jsonb_typeof(j.given) <> 'object'
                    or array(select jsonb_object_keys(j.asked) order by 1)
                       <> array(select jsonb_object_keys(j.given) order by 1))
    -- each as asked
    and not exists (select 1 from g
                     where jsonb_typeof(g.given) is distinct from 'number'
                        or g.given::text !~ '^[0-9]{1,5}$'
                        or case when g.asked = '0'
                                then not (g.given::text::integer <@ p_range)
                                else g.given <> g.asked
                                     or not (g.privileged or g.given::text::integer <@ p_range) end)
    -- none twice, none held
    and not exists (select 1 from g where g.given::text ~ '^[0-9]{1,5}$'
                     group by g.given having count(*) > 1)
    and not exists (select 1 from g join pgfleet.job_ports p
                      on p.host_id = p_host and g.given::text ~ '^[0-9]{1,5}$'
                     and p.port = g.given::text::integer)
$$;
comment on function pgfleet.ports_fit_host(text, int4range, jsonb[]) is
  'Whether the ports planned for the jobs p_jobs ([{"asked","given","privileged"}]) on host p_host with port range p_range are right (the names asked, port 0 from the range, a number as asked and, unless privileged, in the range) and free (none twice, none in pgfleet.job_ports).';

-- What an owner's live jobs take now: the usage its quota
-- (pgfleet.owner_quotas) is held to, counted from the jobs, never stored
-- (docs/decisions/0018). Inlined where it is called.
create or replace function pgfleet.owner_in_use(p_owner text)
returns table (cpu bigint, memory bigint, running bigint)
language sql stable as $$
  select coalesce(sum(r.cpu), 0)::bigint, coalesce(sum(r.memory), 0)::bigint, count(*)::bigint
    from pgfleet.jobs r where r.state in ('assigned', 'running') and r.owner = p_owner
$$;
comment on function pgfleet.owner_in_use(text) is
  'What an owner''s assigned and running jobs take now (cpu millicores, memory MiB, how many): the usage pgfleet.owner_quotas limits.';

create or replace function pgfleet.assign_jobs(p_plan jsonb)
returns table (job_id bigint, attempt integer, host_id text, spec text, uid text)
language plpgsql
-- PL/pgSQL with a generic plan, kept for the session (docs/decisions/0002).
-- Jobs by primary key only, never a scan of the table (as in report_jobs).
set plan_cache_mode = force_generic_plan set enable_seqscan = off as $$
#variable_conflict use_column
declare
  v_quota_owners text[];  -- owners of planned jobs with a quota whose row this transaction holds
begin
  -- Owner quotas (pgfleet.owner_quotas; none: one probe of an empty table).
  -- The planned jobs' owners with a quota have their rows locked first, in a
  -- statement of its own, so the next one's snapshot counts every job
  -- another scheduler assigned them before it let go; their jobs are left out
  -- when another transaction holds the row (planned again, never waited for).
  if exists (select 1 from pgfleet.owner_quotas) then
    select coalesce(array_agg(q.owner), '{}') into v_quota_owners from (
      select q.owner from pgfleet.owner_quotas q
       where q.owner in (select j.owner from pgfleet.jobs j
                          where j.id in (select (e ->> 'job')::bigint from jsonb_array_elements(p_plan) e))
       order by q.owner for update of q skip locked) q;
  end if;
  -- A plan that gives ports locks its hosts first, in a statement of its
  -- own: the next one's snapshot is then taken with the locks held, so it
  -- sees every port committed on them (another scheduler's, which would
  -- otherwise meet pgfleet.job_ports' primary key), and none can be added
  -- on them until this commits (ports are only ever added here, under the
  -- host's lock). Plans without ports skip it.
  if jsonb_path_exists(p_plan, '$[*].ports') then
    perform 1 from pgfleet.hosts h
     where h.id in (select e ->> 'host' from jsonb_array_elements(p_plan) e where e ? 'ports')
     order by h.id for update skip locked;
  end if;
  return query
  -- p_plan: [{"job": 1, "host": "h1", "ports": {"http": 20001}}, ...] (ports
  -- only for a job that asks for some). Per host, all or nothing: the host's
  -- allocation is raised only if everything planned for it still fits (cpu,
  -- memory, its network, ports free and as the jobs ask), so a scheduler
  -- that planned against a stale snapshot touches no row for that host and
  -- re-plans those jobs.
  -- A job listed twice counts once (its first entry): otherwise its resources
  -- would be reserved twice but released once (allocation_drift).
  with plan as (
    select distinct on ((e ->> 'job')::bigint) (e ->> 'job')::bigint as job_id, e ->> 'host' as host_id,
           e -> 'ports' as ports
      from jsonb_array_elements(p_plan) with ordinality as x(e, n)
     order by (e ->> 'job')::bigint, n
  ), claimed as (
    -- The planned jobs still pending, locked. The scheduler read them without
    -- a lock (its claim), so a job cancelled or assigned since is dropped here
    -- (the lock reads a row changed meanwhile again and checks it again). A
    -- job another transaction holds (an operator's open UPDATE) is skipped,
    -- not waited for: a pass never stalls behind a user's transaction, and
    -- the job is planned again. One primary-key lookup per planned job,
    -- whatever the statistics say: a plain join let the planner, with
    -- statistics from before a burst of inserts, scan every pending job once
    -- per planned job (3 s for 500). A job waiting for the jobs it is after
    -- (not_before infinity, sql/024_dependencies.sql) is never placed, even
    -- when a plan names it (a job in its retry backoff still may be).
    select j.id, p.host_id, j.cpu, j.memory, j.network, j.ports as asked, p.ports as given,
           j.privileged, j.attempt, j.formation, j.owner, j.priority
      from plan p
      cross join lateral (
        select j.id, j.cpu, j.memory, j.state, j.desired_state, j.network, j.ports, j.privileged,
               j.attempt, j.formation, j.owner, j.priority, j.not_before
          from pgfleet.jobs j where j.id = p.job_id offset 0) j
     where j.state = 'pending' and j.desired_state = 'run'
       and (j.not_before is null or j.not_before < 'infinity')
     for update of j skip locked
  ), limited as (
    -- Room left under a formation's max_running: its assigned and running
    -- jobs counted in this statement's snapshot, taken under the formation's
    -- lock that every scheduler's pass holds (of any version: an older one
    -- that knows nothing of max_running still assigns through here).
    select f.name, f.max_running - (select count(*) from pgfleet.jobs r
                                     where r.state in ('assigned', 'running')
                                       and r.formation = f.name)::integer as room
      from pgfleet.formations f
     where f.max_running is not null and f.name in (select c.formation from claimed c)
  ), quotas as (
    -- The quotas of the claimed jobs' owners and what their live jobs take
    -- now; held: this transaction holds the quota's row (v_quota_owners).
    select q.owner, q.max_cpu, q.max_memory, q.max_running, q.owner = any(v_quota_owners) as held,
           u.cpu, u.memory, u.running
      from pgfleet.owner_quotas q
      cross join lateral pgfleet.owner_in_use(q.owner) u
     where q.owner in (select c.owner from claimed c)
  ), kept as (
    -- The claimed jobs within those limits: per formation and per owner, in
    -- priority order, the longest prefix that fits (a job that does not fit
    -- keeps those behind it out too). Without limits, all of them.
    select c.id, c.host_id, c.cpu, c.memory, c.network, c.asked, c.given, c.privileged, c.attempt
      from claimed c
     where not exists (select 1 from limited) and not exists (select 1 from quotas)
    union all
    select k.id, k.host_id, k.cpu, k.memory, k.network, k.asked, k.given, k.privileged, k.attempt
      from (select f.*, sum(f.cpu) over o as owner_cpu, sum(f.memory) over o as owner_memory,
                   row_number() over o as owner_running
              from (select c.*,
                           row_number() over (partition by c.formation
                                              order by c.priority desc, c.id) as in_formation
                      from claimed c
                     where exists (select 1 from limited) or exists (select 1 from quotas)) f
              left join limited l on l.name = f.formation
             where l.name is null or f.in_formation <= l.room
            window o as (partition by f.owner order by f.priority desc, f.id)) k
      left join quotas q on q.owner = k.owner
     where q.owner is null
        or (q.held and (q.max_cpu is null or q.cpu + k.owner_cpu <= q.max_cpu)
            and (q.max_memory is null or q.memory + k.owner_memory <= q.max_memory)
            and (q.max_running is null or q.running + k.owner_running <= q.max_running))
  ), need as (
    select c.host_id, sum(c.cpu)::integer as cpu, sum(c.memory)::integer as memory,
           bool_or(c.network = 'bridge') as bridge,
           bool_and(c.asked is null and c.given is null) as portless
      from kept c group by c.host_id
  ), given_ports as (  -- the ports planned, one row each
    select c.host_id, c.id, c.attempt, g.key as name, g.value as port
      from kept c cross join lateral jsonb_each(c.given) g
     where jsonb_typeof(c.given) = 'object'
  ), host_locks as (
    -- Hosts are locked in id order so concurrent schedulers never deadlock.
    -- A host another transaction holds (another scheduler's pass placing on
    -- it, a report freeing it) is skipped, not waited for: its jobs are not
    -- assigned this time and the scheduler plans them again against fresh
    -- rows (docs/decisions/0013).
    select h.id from pgfleet.hosts h where h.id in (select host_id from need)
     order by h.id for update skip locked
  ), reserved as (
    update pgfleet.hosts h
       set cpu_allocated = h.cpu_allocated + n.cpu,
           memory_allocated = h.memory_allocated + n.memory
      from need n
     where h.id = n.host_id and h.id in (select id from host_locks) and h.state = 'up'
       and h.admitted and (h.suspended_until is null or h.suspended_until <= now())
       and h.cpu_allocated + n.cpu <= h.cpu
       and h.memory_allocated + n.memory <= h.memory
       -- host and none every host offers (hosts.networks' default); bridge not
       and (not n.bridge or 'bridge' = any(h.networks))
       and (n.portless or pgfleet.ports_fit_host(
             h.id, h.port_range,
             array(select jsonb_build_object('asked', c.asked, 'given', c.given,
                                             'privileged', c.privileged)
                     from kept c where c.host_id = h.id and (c.asked is not null or c.given is not null))))
    returning h.id
  ), assigned as (
    update pgfleet.jobs j
       set state = 'assigned', host_id = c.host_id, attempt = j.attempt + 1,
           assigned_at = now(), started_at = null, pid = null, error = null,
           -- a new attempt's health and address are not known yet
           health = 'unknown', health_at = null, health_output = null, address = null,
           host_ports = c.given
      from kept c
     -- By primary key only: claimed locked these rows and saw them pending, and
     -- a state condition here let the planner scan the pending index once per
     -- claimed job (quadratic: 500 claimed x 20,000 pending).
     where j.id = c.id and c.host_id in (select id from reserved)
    -- The spec hostd is sent, built for the jobs assigned only
    -- (docs/decisions/0014).
    returning j.id, j.attempt, j.host_id, pgfleet.job_spec_json(j)::text as spec,
              coalesce(j.uid::text, '') as uid
  ), held_ports as (
    insert into pgfleet.job_ports (host_id, port, job_id, attempt, name)
    select g.host_id, g.port::text::integer, g.id, g.attempt + 1, g.name
      from given_ports g where g.host_id in (select id from reserved)
  ), events as (
    insert into pgfleet.job_events (job_id, attempt, kind, host_id)
    select a.id, a.attempt, 'assigned', a.host_id from assigned a
  )
  select a.id, a.attempt, a.host_id, a.spec, a.uid from assigned a;
end $$;
comment on function pgfleet.assign_jobs(jsonb) is
  'Writes a placement plan [{"job":id,"host":id,"ports":{"name":port}}]: pending jobs become assigned (attempt + 1) and hosts'' allocations grow, all-or-nothing per host (cpu, memory, the host offers the job''s network, its ports free and as asked: pgfleet.ports_fit_host), the ports held in pgfleet.job_ports; a planned job no longer pending, or held by another transaction, or beyond its formation''s max_running or its owner''s pgfleet.owner_quotas (counted from the live jobs under the formation''s lock and the quota row''s), is left out. Returns what was assigned, with the spec hostd is sent (pgfleet.job_spec_json as text) and the job''s uid ('''' for a job from before uids).';

-- Advisory, and written after the pass committed, outside the formation's
-- lock: a job another transaction holds (another scheduler assigning it, an
-- operator's update) is skipped, not waited for (docs/decisions/0015). Jobs
-- by primary key only, with a plan kept for the session (as assign_jobs).
create or replace function pgfleet.set_pending_reasons(p_reasons jsonb) returns integer
language plpgsql
set plan_cache_mode = force_generic_plan set enable_seqscan = off as $$
declare
  v_count integer;
begin
  with r as (
    select (e ->> 'job')::bigint as job_id, e ->> 'reason' as reason
      from jsonb_array_elements(p_reasons) e
  ), held as (
    select j.id, r.reason
      from r
      cross join lateral (
        select j.id, j.state, j.error from pgfleet.jobs j where j.id = r.job_id offset 0) j
     where j.state = 'pending' and j.error is distinct from r.reason
       for update of j skip locked
  ), u as (
    update pgfleet.jobs j set error = h.reason from held h where j.id = h.id
    returning 1
  )
  select count(*)::integer into v_count from u;
  return v_count;
end $$;
comment on function pgfleet.set_pending_reasons(jsonb) is
  'Records why pending jobs could not be placed ([{"job":id,"reason":text}]) in jobs.error, for jobs still pending whose reason differs; a job another transaction holds is skipped. Returns how many were written.';

create or replace function pgfleet.dispatch_failed(p_host text, p_jobs jsonb, p_error text)
returns integer
language plpgsql as $$
declare
  v_count integer;
begin
  -- p_jobs: [{"job": 1, "attempt": 1}, ...]
  with req as (
    select (e ->> 'job')::bigint as job_id, (e ->> 'attempt')::integer as attempt
      from jsonb_array_elements(p_jobs) e
  ), back as (
    update pgfleet.jobs j set state = 'pending', error = 'dispatch to host ' || p_host || ' failed: ' || p_error
      from req
     where j.id = req.job_id and j.attempt = req.attempt and j.host_id = p_host and j.state = 'assigned'
    returning j.id, j.attempt, j.cpu, j.memory, j.formation
  ), freed as (
    update pgfleet.hosts h
       set cpu_allocated = h.cpu_allocated - s.cpu, memory_allocated = h.memory_allocated - s.memory,
           suspensions = h.suspensions + 1,
           suspended_until = now() + pgfleet.doubling_delay(h.suspensions, 60)
      from (select coalesce(sum(cpu), 0)::integer as cpu, coalesce(sum(memory), 0)::integer as memory
              from back) s
     where h.id = p_host
  ), events as (
    insert into pgfleet.job_events (job_id, attempt, kind, host_id, detail)
    select b.id, b.attempt, 'requeued', p_host, 'dispatch failed: ' || p_error from back b
  )
  select count(*) into v_count from back;
  perform pg_notify(pgfleet.work_channel(), pgfleet.all_formations());
  return v_count;
end $$;
comment on function pgfleet.dispatch_failed(text, jsonb, text) is
  'The scheduler could not deliver these assigned attempts to the host: they go back to pending (to be placed elsewhere), their resources are freed, and the host is suspended with exponential backoff.';

create or replace function pgfleet.dispatch_unanswered(p_host text) returns void
language sql as $$
  update pgfleet.hosts
     set suspensions = suspensions + 1,
         suspended_until = now() + pgfleet.doubling_delay(suspensions, 60)
   where id = p_host
$$;
comment on function pgfleet.dispatch_unanswered(text) is
  'The host took a dispatch request but gave no answer in time: it may have started the jobs, so they stay assigned (hostd''s reconcile starts any that did not arrive; host loss requeues them if the host is gone), and the host is suspended with the same backoff as a failed dispatch, since it is overloaded or unwell.';

create or replace function pgfleet.dispatch_succeeded(p_hosts text[]) returns void
language sql as $$
  update pgfleet.hosts set suspensions = 0 where id = any(p_hosts) and suspensions <> 0
$$;
comment on function pgfleet.dispatch_succeeded(text[]) is
  'Resets the suspension backoff of hosts that took a dispatch (one call per scheduler pass).';

-- Built as json (text, in key order) rather than jsonb: the scheduler sends it
-- on as text, and jsonb_build_object plus the cast back to text cost twice as
-- much, 8 us a job of a scheduler pass's claim
-- (docs/benchmarks/2026-11-25-shorter-way-to-running.md).
create or replace function pgfleet.job_spec_json(j pgfleet.jobs) returns json
language sql stable as $$
  select json_build_object(
    'command', j.command, 'env', j.env, 'cpu', j.cpu, 'memory', j.memory,
    'constraints', j.constraints, 'priority', j.priority, 'max_attempts', j.max_attempts,
    'formation', j.formation, 'rootfs', j.rootfs, 'user', j.run_as, 'network', j.network,
    'pids_max', j.pids_max, 'cpu_hard_limit', j.cpu_hard_limit,
    'stop_grace_seconds', j.stop_grace_seconds, 'privileged', j.privileged,
    'log_max_files', j.log_max_files, 'log_max_file_mb', j.log_max_file_mb, 'disk', j.disk,
    'seccomp', j.seccomp, 'health_check', j.health_check, 'ports', j.host_ports,
    'files', j.files)
$$;
comment on function pgfleet.job_spec_json(pgfleet.jobs) is
  'The job as the JSON spec hostd runs (the "spec" of POST /v1/jobs), as json text: what the scheduler sends; its ports are the host ports the attempt was given (jobs.host_ports). pgfleet.job_spec is the same as jsonb.';

create or replace function pgfleet.job_spec(j pgfleet.jobs) returns jsonb
language sql stable as $$
  select pgfleet.job_spec_json(j)::jsonb
$$;
comment on function pgfleet.job_spec(pgfleet.jobs) is
  'The job as the JSON spec hostd runs (the "spec" of POST /v1/jobs); one definition for the scheduler and hostd.';

-- Through jobs_retry_at_idx, always, whatever the statistics say
-- (docs/decisions/0002): with sorting off, the only plan left for the first
-- not_before in order is that index.
create or replace function pgfleet.next_retry_in() returns double precision
language plpgsql stable set enable_sort = off as $$
declare
  v_retry timestamptz;
  v_healthy timestamptz;
  v_cron timestamptz;
begin
  select j.not_before into v_retry from pgfleet.jobs j
   where j.state = 'pending' and j.not_before is not null and j.not_before > now()
     and j.not_before < 'infinity'  -- (waiting for other jobs: settled when they end)
   order by j.not_before limit 1;
  -- A rollout's next step comes when a new replica has been healthy for
  -- min_healthy_time (sql/022_versions.sql; docs/decisions/0016).
  if exists (select 1 from pgfleet.rollouts r where r.finished_at is null) then
    select min(pgfleet.replica_healthy_since(j) + f.min_healthy_time) into v_healthy
      from pgfleet.rollouts r
      join pgfleet.formations f on f.id = r.formation_id
      join pgfleet.jobs j on j.formation = f.name and j.version = r.to_version
     where r.finished_at is null and j.state = 'running'
       and pgfleet.replica_healthy_since(j) + f.min_healthy_time > now();
  end if;
  -- A cron formation's next due time (sql/024_cron.sql; formations_cron_due_idx).
  select min(f.next_due_at) into v_cron from pgfleet.formations f
   where f.kind = 'cron' and f.deleted_at is null and f.next_due_at > now();
  return extract(epoch from least(v_retry, v_healthy, v_cron) - now())::double precision;
end $$;
comment on function pgfleet.next_retry_in() is
  'Seconds until the earliest pending job''s retry backoff ends, a rolling update''s new replica has been healthy for its min_healthy_time, or a cron formation is next due (null if none waits): when a sleeping scheduler must wake by itself, since nothing notifies it then.';
