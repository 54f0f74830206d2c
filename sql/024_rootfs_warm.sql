-- Warm-host affinity (migration 0038): hostd reports the root filesystems
-- it ran recently; schedulers read them with the host's config.

create or replace function pgfleet.report_rootfs_warm(p_host text, p_generation bigint,
                                                      p_names text[])
returns void
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_bad text;
begin
  perform pgfleet.require_host(p_host);
  if p_names is null then
    raise exception 'rootfs_warm: names must be an array (got null)' using errcode = 'check_violation';
  end if;
  if cardinality(p_names) > 16 then
    raise exception 'rootfs_warm: at most 16 names (got %)', cardinality(p_names)
      using errcode = 'check_violation';
  end if;
  select n into v_bad from unnest(p_names) n
   where n is null or n = '' or octet_length(n) > pgfleet.max_path_bytes() limit 1;
  if found then
    raise exception 'rootfs_warm: each name must be 1 to % bytes (got %)', pgfleet.max_path_bytes(),
      coalesce(octet_length(v_bad)::text, 'null') using errcode = 'check_violation';
  end if;
  -- Only the host's current generation: a hostd that lost its host to a
  -- newer registration says nothing about what that one runs.
  if not exists (select 1 from pgfleet.hosts h where h.id = p_host and h.generation = p_generation) then
    return;
  end if;
  insert into pgfleet.host_rootfs as r (host_id, names) values (p_host, p_names)
  on conflict (host_id) do update set names = excluded.names, reported_at = now()
   where r.names is distinct from excluded.names;
  if found then
    -- Schedulers keep a host's config by version (docs/decisions/0009).
    update pgfleet.hosts h set config_version = h.config_version + 1 where h.id = p_host;
  end if;
end $$;
comment on function pgfleet.report_rootfs_warm(text, bigint, text[]) is
  'hostd (for its host, its current generation): the root filesystems it ran recently, newest first (at most 16 names of 1 to max_path_bytes bytes); written, and hosts.config_version bumped, only when the set changes.';

-- pgfleet plan (cli/plan.cpp) runs the scheduler's placement core on what
-- these two return: the job's request, and the hosts as a pass's snapshot
-- reads them (schedulerd_load_host_snapshot's predicates: up, admitted, not
-- suspended, heartbeat fresh) with, for the others, why they are not in it.
-- SECURITY DEFINER so that a submitter gets what placing needs (ports held,
-- whether a host is warm for its rootfs) without reading job_ports or
-- host_rootfs: no other owner's job or rootfs names.

create or replace function pgfleet.placement_request(p_job bigint)
returns table (id bigint, state text, cpu integer, memory integer, priority integer,
               constraints jsonb, privileged boolean, pinned_host text, bridge boolean,
               ports jsonb, rootfs text, formation text, spread text, reason text)
language plpgsql stable security definer set search_path = pgfleet, pg_temp as $$
#variable_conflict use_column
declare
  v_caller text := pgfleet.caller();
begin
  return query
  select j.id::bigint, j.state::text, j.cpu::integer, j.memory::integer, j.priority::integer,
         j.constraints::jsonb, j.privileged::boolean, coalesce(j.pinned_host::text, ''),
         j.network::text = 'bridge', coalesce(j.ports::jsonb, '{}'), coalesce(j.rootfs::text, ''),
         j.formation::text, coalesce(f.spread::text, ''), coalesce(j.error, '')
    from pgfleet.jobs j left join pgfleet.formations f on f.name = j.formation
   where j.id = p_job and (j.owner = v_caller or pgfleet.sees_every_job());
  if not found then
    -- The same words whether it never existed or is another owner's: a
    -- submitter cannot learn which ids are others'.
    raise exception 'job % does not exist, or is not yours (a submitter plans only its own jobs)', p_job
      using errcode = 'no_data_found';
  end if;
end $$;
comment on function pgfleet.placement_request(bigint) is
  'What the placement core needs of a job the caller may see (its own; every job for operators, readers, schedulers): its request as schedulerd_read_pending reads it, its state, rootfs, its formation''s spread and reason (jobs.error: why the scheduler left it pending). Raises no_data_found for a job that does not exist or is another owner''s, in the same words.';

create or replace function pgfleet.placement_hosts(p_rootfs text, p_formation text)
returns table (id text, cpu integer, memory integer, cpu_allocated integer,
               memory_allocated integer, labels jsonb, isolates boolean, condition text,
               bridge boolean, port_lo integer, port_hi integer, ports_held integer[], warm boolean,
               formation_jobs integer, not_up text)
language sql stable security definer set search_path = pgfleet, pg_temp as $$
  select h.id::text, h.cpu::integer, h.memory::integer, h.cpu_allocated::integer,
         h.memory_allocated::integer, h.labels::jsonb,
         pgfleet.driver_isolates(h.driver), coalesce(hb.condition::text, ''),
         coalesce('bridge' = any(h.networks), false),
         coalesce(lower(h.port_range), 0)::integer, coalesce(upper(h.port_range) - 1, -1)::integer,
         coalesce((select array_agg(jp.port::integer order by jp.port) from pgfleet.job_ports jp
                    where jp.host_id = h.id), '{}'),
         coalesce(p_rootfs <> '' and p_rootfs = any(r.names), false),
         (select count(*)::integer from pgfleet.jobs j
           where j.formation = p_formation and j.host_id = h.id
             and j.state in ('assigned', 'running') and j.desired_state = 'run'),
         case when h.state <> 'up' then h.state::text
              when not h.admitted then 'not admitted'
              when h.suspended_until > now() then 'suspended'
              when hb.last_seen is null or hb.last_seen <= now() - pgfleet.host_ttl()
                then 'heartbeat late'
         end
    from pgfleet.hosts h
    left join pgfleet.host_heartbeats hb on hb.host_id = h.id
    left join pgfleet.host_rootfs r on r.host_id = h.id
   order by h.id
$$;
comment on function pgfleet.placement_hosts(text, text) is
  'Every host as the placement core sees it (capacity, allocations, labels, isolation, condition, bridge, port range and ports held), whether it ran rootfs p_rootfs recently (pgfleet.host_rootfs), how many live jobs of formation p_formation it runs (the spread), and not_up: null for a host a scheduler''s pass places on, else why not (draining, offline, lost, not admitted, suspended, heartbeat late).';
