-- A job's disk and seccomp profile (issue 33). The disk: the MiB of its writable space, enforced by the
-- container driver (the work dir is a filesystem of that size of its own,
-- hostd/drivers/container/container_disk.h); 0 = no limit (the work dir shares the
-- filesystem of hostd's data dir). At most the setting max_disk_mib,
-- checked at insert (pgfleet.limit_problem).
create domain pgfleet.spec_disk as integer
  constraint "disk must be between 0 and 16777216 (MiB; 0 = no limit)"
    check (value between 0 and 16777216);
alter table pgfleet.jobs add column disk pgfleet.spec_disk not null default 0;
alter table pgfleet.formations add column disk pgfleet.spec_disk not null default 0;
comment on column pgfleet.jobs.disk is
  'MiB of the job''s writable work dir, a filesystem of its own on the host (container driver): a job writing past it gets ENOSPC and fails with "disk full"; 0 = no limit. At most setting max_disk_mib.';
comment on column pgfleet.formations.disk is
  'The replicas'' disk (pgfleet.jobs.disk).';

-- A job's seccomp profile: 'default' (hostd/drivers/container/seccomp_filter.h,
-- modelled on Docker's default profile) for every container job, or
-- 'unconfined', which only members of pgfleet_privileged may ask for
-- (pgfleet.privilege_problem), as Docker's --security-opt seccomp=unconfined.
create domain pgfleet.spec_seccomp as text
  constraint "seccomp must be 'default' or 'unconfined'" check (value in ('default', 'unconfined'));
alter table pgfleet.jobs add column seccomp pgfleet.spec_seccomp not null default 'default';
alter table pgfleet.formations add column seccomp pgfleet.spec_seccomp not null default 'default';
comment on column pgfleet.jobs.seccomp is
  'The container job''s seccomp profile: default (no new namespaces, mount, modules, keyring, bpf, clock, ptrace attach...) or unconfined (privileged jobs only).';
comment on column pgfleet.formations.seccomp is
  'The replicas'' seccomp profile (pgfleet.jobs.seccomp).';
