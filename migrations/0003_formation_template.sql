-- A formation's job template is a whole job: everything a job row can say
-- about how it runs, a service formation's replicas can say too. The
-- template columns (pgfleet.template_columns(), sql/) have the same names,
-- types, defaults and named CHECK rules in pgfleet.formations as in
-- pgfleet.jobs; tests/integration checks that they never drift apart.
alter table pgfleet.formations
  add column rootfs text,
  add column run_as text,
  add column network text not null default 'host'
    constraint "network must be 'host' or 'none'" check (network in ('host', 'none')),
  add column pids_max integer not null default 1024
    constraint "pids_max must be > 0" check (pids_max > 0),
  add column cpu_hard_limit boolean not null default false,
  add column stop_grace_seconds integer not null default 10
    constraint "stop_grace_seconds must be >= 0" check (stop_grace_seconds >= 0);
comment on column pgfleet.formations.rootfs is 'Job template: root filesystem of each replica (a name under hostd''s rootfs directory, or a path); null = the host''s, read-only.';
comment on column pgfleet.formations.run_as is 'Job template: user each replica runs as (the spec''s "user"); null = the driver''s default (nobody in containers).';
comment on column pgfleet.formations.network is 'Job template: host (share the host''s network) or none (a private, empty network namespace).';
comment on column pgfleet.formations.pids_max is 'Job template: most processes each replica may have at once.';
comment on column pgfleet.formations.cpu_hard_limit is 'Job template: also cap each replica at `cpu` millicores with a CFS quota (not only shares).';
comment on column pgfleet.formations.stop_grace_seconds is 'Job template: seconds between SIGTERM and SIGKILL when a replica is stopped.';
