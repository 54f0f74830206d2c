-- jobs.idempotency_key stays unique through a partial unique index (same
-- name) over the rows that have a key. Most jobs have none, yet every write
-- of a job row that is not a HOT update (each state change: three a job)
-- added a NULL entry to the full index: about 3 % of the database's time per
-- job on the hot path (docs/benchmarks/2026-11-25-fewer-statements-per-job.md).
alter table pgfleet.jobs drop constraint if exists "idempotency_key must be unique";
create unique index if not exists "idempotency_key must be unique"
  on pgfleet.jobs (idempotency_key) where idempotency_key is not null;
