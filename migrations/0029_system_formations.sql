-- System formations (Nomad's system jobs, Kubernetes' DaemonSets): one
-- replica on every eligible host. A replica is pinned to its host
-- (jobs.pinned_host): placed there or nowhere.
alter table pgfleet.formations
  drop constraint "kind must be 'service' or 'batch'",
  add constraint "kind must be service, batch or system"
    check (kind in ('service', 'batch', 'system')),
  drop constraint "a service formation needs a command",
  add constraint "a service or system formation needs a command"
    check (kind = 'batch' or command is not null);

comment on column pgfleet.formations.kind is
  'service (keep replicas running, restart forever with backoff), system (one such replica on every eligible host: up, admitted, matching its constraints, isolating its jobs unless it is privileged; replicas move with the hosts, not to other hosts) or batch (run each job to completion, retry up to max_attempts).';

alter table pgfleet.jobs add column pinned_host pgfleet.host_id;
comment on column pgfleet.jobs.pinned_host is
  'A system formation''s replica: the one host it may run on (null: any host its constraints allow).';
