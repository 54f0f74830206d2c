-- job_events.job_id no longer has a foreign key (docs/decisions/0006).
-- Events are written only by pgfleet's own functions, for the jobs they have
-- just locked or written; what the key's ON DELETE CASCADE did, the
-- statement-level trigger jobs_after_delete (sql/020_triggers.sql) does now,
-- once per DELETE.
alter table pgfleet.job_events drop constraint if exists job_events_job_id_fkey;
