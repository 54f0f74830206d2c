-- pgfleet.explain(job) and pgfleet.explain(spec): where a job would be
-- placed and why not on each other host, counted by kind, for psql (the CLI's
-- `pgfleet plan` runs the placement core itself, core/placement/explain.h).
-- The verdicts here are the placement core's filters written in SQL, in its
-- order (placement::FirstRejection), and its rank (spread, warm, bin-pack
-- fullness compared exactly, then the lower host id);
-- tests/integration/explain_test.cpp checks that the two agree over a set
-- of fleets (docs/decisions/0020).

-- p_req: a row of pgfleet.placement_request as jsonb. The answer:
-- {"would_place_on": host or null, "warm": its rootfs ran there recently,
--  "feasible": hosts with room, "not_on": [{"kind", "detail", "hosts",
--  "largest_free"}, ...] most hosts first}; kinds as the placement core's
-- (constraint, pinned_elsewhere, not_isolating, no_bridge, condition, cpu,
-- memory, ports, preemption with how many victims, ranked_lower, and not_up
-- with its detail: draining, ...).
create or replace function pgfleet.explain_request(p_req jsonb) returns jsonb
language sql stable as $$
  with r as (
    select (p_req ->> 'cpu')::integer as r_cpu, (p_req ->> 'memory')::integer as r_memory,
           coalesce(p_req -> 'constraints', '{}') as r_constraints,
           (p_req ->> 'privileged')::boolean as r_privileged, p_req ->> 'pinned_host' as r_pinned,
           (p_req ->> 'bridge')::boolean as r_bridge, coalesce(p_req -> 'ports', '{}') as r_ports,
           p_req ->> 'rootfs' as r_rootfs, p_req ->> 'formation' as r_formation,
           coalesce(p_req ->> 'spread', '') as r_spread,
           coalesce((p_req ->> 'priority')::integer, 50) as r_priority
  ), h as (
    select h.*, r.*,
           -- the first constraint (by key, bytewise as std::map) its labels lack
           (select c.key || '=' || c.value from jsonb_each_text(r.r_constraints) c
             where h.labels ->> c.key is distinct from c.value
             order by c.key collate "C" limit 1) as lacks,
           -- its ports: each number free (inside the range unless privileged),
           -- and enough free ports of the range left for the zeros (PickPorts)
           (select coalesce(bool_and(e.n = 0 or (not e.n = any(h.ports_held)
                                                  and (r.r_privileged or e.n between h.port_lo and h.port_hi))), true)
                   and count(*) filter (where e.n = 0)
                       <= greatest(h.port_hi - h.port_lo + 1, 0)
                          - (select count(*) from unnest(h.ports_held) p
                              where p between h.port_lo and h.port_hi)
                          - count(*) filter (where e.n <> 0 and e.n between h.port_lo and h.port_hi
                                               and not e.n = any(h.ports_held))
              from (select x.value::text::integer as n from jsonb_each(r.r_ports) x) e) as ports_fit,
           case when r.r_spread = 'host' then h.id
                when r.r_spread <> '' then coalesce(h.labels ->> r.r_spread, '') end as spread_value
      from r cross join pgfleet.placement_hosts(r.r_rootfs, r.r_formation) h
  ), v as (
    select h.*,
           case when h.not_up is not null then 'not_up'
                when h.r_pinned <> '' and h.r_pinned <> h.id then 'pinned_elsewhere'
                when h.lacks is not null then 'constraint'
                when not h.r_privileged and not h.isolates then 'not_isolating'
                when h.r_bridge and not h.bridge then 'no_bridge'
                when h.condition <> '' then 'condition'
                when h.cpu <= 0 or h.cpu::bigint - h.cpu_allocated < h.r_cpu then 'cpu'
                when h.memory <= 0 or h.memory::bigint - h.memory_allocated < h.r_memory then 'memory'
                when not h.ports_fit then 'ports'
           end as kind,
           -- the detail of the kind above: its branches in the same order
           case when h.not_up is not null then h.not_up
                when h.r_pinned <> '' and h.r_pinned <> h.id then h.r_pinned
                when h.lacks is not null then h.lacks
                when not h.r_privileged and not h.isolates then ''
                when h.r_bridge and not h.bridge then ''
                when h.condition <> '' then split_part(h.condition, ':', 1)
                else '' end as detail,
           -- the formation's live jobs on the host's spread value (0 without a spread)
           coalesce(sum(h.formation_jobs) filter (where h.not_up is null)
                      over (partition by h.spread_value), 0) as spread_jobs
      from h
  ), ranked as (
    select v.*,
           row_number() over (
             order by v.spread_jobs, v.warm desc,
                      -- fullness after placing, the mean of cpu and memory
                      -- utilisation as an exact fraction's floor at 1e-40
                      -- (distinct fractions of these sizes differ by more)
                      div(((v.cpu_allocated::numeric + v.r_cpu) * v.memory
                           + (v.memory_allocated::numeric + v.r_memory) * v.cpu) * 1e40,
                          v.cpu::numeric * v.memory) desc,
                      v.id collate "C") as place
      from v where v.kind is null
  ), turned as (
    -- A host that lacks cpu or memory, where the job could run once room is
    -- made (placement::PickVictims' Eligible), and stopping lower-priority
    -- jobs would make it: "preemption", with how many.
    select v.id, v.cpu, v.memory, v.cpu_allocated, v.memory_allocated,
           case when p.victims is not null then 'preemption' else v.kind end as kind,
           case when p.victims is not null then p.victims::text else v.detail end as detail
      from v cross join lateral (
        select case when v.kind in ('cpu', 'memory') and v.r_cpu > 0 and v.r_memory > 0
                         and v.cpu >= v.r_cpu and v.memory >= v.r_memory and v.ports_fit
                    then pgfleet.victims_needed(v.id, v.r_cpu - (v.cpu::bigint - v.cpu_allocated),
                                                v.r_memory - (v.memory::bigint - v.memory_allocated),
                                                v.r_priority) end as victims) p
     where v.kind is not null
  ), counted as (
    select v.kind, v.detail, count(*)::integer as hosts,
           case when v.kind = 'cpu' then max(greatest(v.cpu - v.cpu_allocated, 0))
                when v.kind = 'memory' then max(greatest(v.memory - v.memory_allocated, 0)) end
             as largest_free
      from turned v group by v.kind, v.detail
    union all
    select 'ranked_lower', '', count(*)::integer, null from ranked where place > 1 having count(*) > 0
  )
  select jsonb_build_object(
           'would_place_on', (select id from ranked where place = 1),
           'warm', coalesce((select warm from ranked where place = 1), false),
           'feasible', (select count(*) from ranked),
           'not_on', coalesce((select jsonb_agg(jsonb_strip_nulls(to_jsonb(c))
                                                order by c.hosts desc, c.kind, c.detail)
                                 from counted c), '[]'))
$$;
comment on function pgfleet.explain_request(jsonb) is
  'The placement core''s explanation, in SQL, for a request as pgfleet.placement_request returns it (as jsonb): the host it would be placed on now (spread, then warm for its rootfs, then fullest after placing, then the lower id), whether that host is warm, how many hosts have room, and the other hosts counted by the first filter that turns it away (kind, detail, hosts; largest_free for cpu and memory), a host that lacks cpu or memory counted as preemption (detail: how many victims, pgfleet.victims_needed) when stopping lower-priority preemptible jobs would make room.';

create or replace function pgfleet.explain(p_job bigint) returns jsonb
language plpgsql stable as $$
declare
  v_req record;
begin
  -- placement_request raises for a job the caller may not see, in the words
  -- it uses for one that does not exist.
  select * into v_req from pgfleet.placement_request(p_job);
  if v_req.state <> 'pending' then
    raise exception 'job % is %, not pending: explain says where a pending job would go', p_job,
      v_req.state using errcode = 'invalid_parameter_value';
  end if;
  return pgfleet.explain_request(to_jsonb(v_req))
         || jsonb_build_object('job', p_job, 'reason', nullif(v_req.reason, ''));
end $$;
comment on function pgfleet.explain(bigint) is
  'For a pending job the caller may see (its own; every job for operators, readers and schedulers): pgfleet.explain_request''s answer, with the reason the scheduler wrote (jobs.error). Another owner''s job is refused as one that does not exist.';

-- Checked as an insert would check it, by inserting it and rolling the
-- insert back (nothing stays, no scheduler is woken: NOTIFY is sent at
-- commit only); so it needs what submitting needs.
create or replace function pgfleet.explain(p_spec jsonb) returns jsonb
language plpgsql volatile as $$
declare
  v_columns text;
  v_bad text;
  v_id bigint;
  v_answer jsonb;
begin
  if p_spec is null or jsonb_typeof(p_spec) <> 'object' then
    raise exception 'spec must be a JSON object of job fields (got %)', coalesce(jsonb_typeof(p_spec), 'null')
      using errcode = 'invalid_parameter_value';
  end if;
  select k into v_bad from jsonb_object_keys(p_spec) k
   where k = 'id' or not exists (select 1 from pg_attribute a
                                  where a.attrelid = 'pgfleet.jobs'::regclass and a.attname = k
                                    and a.attnum > 0 and not a.attisdropped)
   limit 1;
  if found then
    raise exception 'spec: % is not a field a job is submitted with (the columns of pgfleet.jobs but id)', v_bad
      using errcode = 'invalid_parameter_value';
  end if;
  -- As jobs_after_insert would say it (the insert's RETURNING would first
  -- meet the row-level security of another owner's row, in other words).
  if p_spec ? 'owner' and p_spec ->> 'owner' is distinct from pgfleet.caller() then
    raise exception 'owner must be the submitting role % (the spec sets %)', pgfleet.caller(),
      coalesce(p_spec ->> 'owner', 'null') using errcode = 'insufficient_privilege', column = 'owner';
  end if;
  select string_agg(quote_ident(k), ', ') into v_columns from jsonb_object_keys(p_spec) k;
  if v_columns is null then
    raise exception 'spec: command is required' using errcode = 'invalid_parameter_value';
  end if;
  begin
    execute format('insert into pgfleet.jobs (%s) select %s from jsonb_populate_record(null::pgfleet.jobs, $1) returning id',
                   v_columns, v_columns) into v_id using p_spec;
    v_answer := pgfleet.explain_request((select to_jsonb(r) from pgfleet.placement_request(v_id) r));
    raise exception 'pgfleet.explain: roll back' using errcode = 'PF038';
  exception when sqlstate 'PF038' then
    null;  -- the insert is undone; v_answer is kept
  end;
  return v_answer;
end $$;
comment on function pgfleet.explain(jsonb) is
  'For a spec not submitted ({"command": [...], "cpu": 500, "constraints": {...}, ...}: fields named as pgfleet.jobs'' columns): refused as its insert would be, else pgfleet.explain_request''s answer for it. The insert is rolled back.';
