-- Sysbatch formations (Nomad's sysbatch): the template run once to
-- completion on every eligible host (pgfleet.system_hosts), and on every host
-- that joins or becomes eligible later, until the formation is marked done
-- (pgfleet.formation_done). One job per (formation, host) for the
-- formation's life, pinned to its host (jobs.pinned_host); its retries are
-- its own attempts, up to formations.max_attempts.
alter table pgfleet.formations
  drop constraint "kind must be service, batch or system",
  add constraint "kind must be service, batch, system or sysbatch"
    check (kind in ('service', 'batch', 'system', 'sysbatch')),
  drop constraint "a service or system formation needs a command",
  add constraint "a service, system or sysbatch formation needs a command"
    check (kind = 'batch' or command is not null),
  add column done_at timestamptz,
  add constraint "only a sysbatch formation can be done" check (kind = 'sysbatch' or done_at is null),
  add column max_attempts pgfleet.spec_max_attempts not null default 1;

comment on column pgfleet.formations.kind is
  'service (keep replicas running, restart forever with backoff), system (one such replica on every eligible host: up, admitted, matching its constraints, isolating its jobs unless it is privileged; replicas move with the hosts, not to other hosts), sysbatch (run the template once to completion on every such host, and on each host that becomes eligible, until done_at is set) or batch (run each job to completion, retry up to max_attempts).';
comment on column pgfleet.formations.done_at is
  'Sysbatch formations: when it was marked done (pgfleet.formation_done); from then on hosts that join get no job of it, the jobs already made run to completion. Null: still running on every eligible host. Creating the formation again clears it.';
comment on column pgfleet.formations.max_attempts is
  'Sysbatch formations: how many times each host''s job runs before it stays failed (a batch job''s max_attempts). Copied into every job the formation makes; service and system replicas restart regardless.';

-- What a sysbatch formation's pass reads: its jobs, by the host each is pinned to.
create index jobs_pinned_by_formation_idx on pgfleet.jobs (formation, pinned_host)
  where pinned_host is not null;
comment on index pgfleet.jobs_pinned_by_formation_idx is
  'A formation''s pinned jobs (system replicas, sysbatch runs) by host, in any state: which hosts a sysbatch formation has already run on.';

comment on column pgfleet.formations.created_at is
  'When the formation was created, or created again after pgfleet.delete_formation: a sysbatch formation counts the hosts it has run on from then.';
