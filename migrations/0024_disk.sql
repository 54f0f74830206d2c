-- A job's disk (issue 33): the MiB of its writable space, enforced by the
-- container driver (the work dir is a filesystem of that size of its own,
-- hostd/drivers/container_disk.h); 0 = no limit (the work dir shares the
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
