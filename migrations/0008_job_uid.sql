-- Each job's identity beyond its id: made at insert, kept by backup and
-- restore. A host keys what it keeps of an attempt (its directory, its
-- records) by it, so a job of a re-created or restored database, whose id and
-- attempt number may be those of an attempt the host ran for another database,
-- is never taken for that attempt. Jobs from before this column have none
-- (null), and hosts then go by id and attempt alone, as before.
alter table pgfleet.jobs add column uid uuid;
alter table pgfleet.jobs alter column uid set default gen_random_uuid();
comment on column pgfleet.jobs.uid is
  'The job''s identity across databases: made at insert (and kept by backup and restore); hosts key an attempt''s directory and records by it, so the same id and attempt from another or restored database is never mistaken for it. Null for jobs from before it existed.';
