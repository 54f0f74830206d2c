-- Warm-host affinity (issue 38, item 7): the root filesystems each host ran
-- recently, as hostd reports them (pgfleet.report_rootfs_warm, only when
-- the set changes). The placement core ranks, among the hosts with room, one
-- that ran the job's rootfs first (core/placement/README.md). A table of
-- its own, not a column of hosts: submitters read pgfleet.hosts, and which
-- root filesystems other owners run is not theirs to see (pgfleet plan
-- learns only whether a host is warm for its own job's rootfs).
create table pgfleet.host_rootfs (
  host_id text primary key references pgfleet.hosts (id) on delete cascade,
  names text[] not null,
  reported_at timestamptz not null default now(),
  constraint "host_rootfs.names: at most 16 names" check (cardinality(names) <= 16)
);
comment on table pgfleet.host_rootfs is
  'The root filesystems each host ran recently (warm-host affinity), written by pgfleet.report_rootfs_warm when hostd''s set changes; read by schedulers with the host''s config (hosts.config_version is bumped with each change).';
comment on column pgfleet.host_rootfs.host_id is 'The host (pgfleet.hosts.id); the row goes with the host.';
comment on column pgfleet.host_rootfs.names is
  'Rootfs names (jobs.rootfs) of the attempts the host started most recently, newest first: at most 16, each at most pgfleet.max_path_bytes() bytes.';
comment on column pgfleet.host_rootfs.reported_at is 'When the set last changed (database clock).';
