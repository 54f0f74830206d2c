-- What `pgfleet plan` and pgfleet.explain say of preemption: a host that
-- lacks cpu or memory for a job, where stopping lower-priority preemptible
-- jobs would make room, is counted as "would need preemption of N jobs"
-- (N: the fewest, as placement::PickVictims chooses them on that host).
-- Both read the candidates and budgets the scheduler reads
-- (schedulerd/store_preemption.sql), through these functions: a submitter
-- sees no other owner's jobs, so they give only what the count needs (no job
-- id, no owner; a candidate's n orders them as their ids do).

create or replace function pgfleet.preemption_candidates(p_priority integer, p_host text default null)
returns table (n bigint, host_id text, cpu integer, memory integer, priority integer, formation text)
language sql stable security definer set search_path = pgfleet, pg_temp as $$
  select row_number() over (order by j.id), j.host_id::text, j.cpu::integer, j.memory::integer,
         j.priority::integer, j.formation::text
    from pgfleet.jobs j join pgfleet.hosts h on h.id = j.host_id
   where j.state in ('assigned', 'running') and j.desired_state = 'run' and j.preemptible
     and j.priority < p_priority and h.state = 'up' and h.admitted
     and (p_host is null or j.host_id = p_host)
$$;
comment on function pgfleet.preemption_candidates(integer, text) is
  'The jobs a scheduler could stop for a job of priority p_priority (on host p_host, or on any): assigned or running, wanted, preemptible, of lower priority, on a host taking work; without ids or owners (n orders them as their ids do). What pgfleet plan and pgfleet.explain count victims from.';

create or replace function pgfleet.preemption_budgets()
returns table (formation text, may_lose integer)
language sql stable security definer set search_path = pgfleet, pg_temp as $$
  select f.name::text, greatest(0, (select count(*) from pgfleet.jobs j
                                     where j.formation = f.name and j.state = 'running'
                                       and j.desired_state = 'run') - f.min_available)::integer
    from pgfleet.formations f
   where f.min_available is not null
$$;
comment on function pgfleet.preemption_budgets() is
  'Per formation with a min_available (a disruption budget): how many more of its running jobs preemption may stop. Formations without one are not listed (no limit).';

-- The fewest victims on p_host that free p_need_cpu and p_need_memory (what
-- the host lacks: either may be 0 or less) for a job of priority p_priority
-- within the budgets, null when none do. As placement::PickVictims: the
-- candidates are the host's 12 of lowest priority (largest first among
-- equals, then by id; kMaxVictimCandidates), searched exactly. A set that
-- frees enough is not grown, so the search stays small.
create or replace function pgfleet.victims_needed(p_host text, p_need_cpu bigint,
                                                  p_need_memory bigint, p_priority integer)
returns integer
language sql stable security definer set search_path = pgfleet, pg_temp as $$
  with recursive c as (
    select row_number() over (order by x.priority, -(x.cpu::bigint + x.memory), x.n) as i, x.*
      from pgfleet.preemption_candidates(p_priority, p_host) x
     order by x.priority, -(x.cpu::bigint + x.memory), x.n
     limit 12
  ), b as (
    select * from pgfleet.preemption_budgets()
  ), s (last, k, cpu, memory, formations) as (
    select 0::bigint, 0, 0::bigint, 0::bigint, '{}'::text[]
    union all
    select c.i, s.k + 1, s.cpu + greatest(c.cpu, 0), s.memory + greatest(c.memory, 0),
           s.formations || c.formation
      from s join c on c.i > s.last
     where (s.cpu < p_need_cpu or s.memory < p_need_memory)
       and coalesce(cardinality(array_positions(s.formations, c.formation))
                      < (select b.may_lose from b where b.formation = c.formation), true)
  )
  select min(s.k)::integer from s
   where s.k > 0 and s.cpu >= p_need_cpu and s.memory >= p_need_memory
$$;
comment on function pgfleet.victims_needed(text, bigint, bigint, integer) is
  'The fewest preemptible jobs of priority below p_priority on host p_host whose stopping frees p_need_cpu millicores and p_need_memory MiB within the formations'' budgets (as placement::PickVictims chooses them), or null.';
