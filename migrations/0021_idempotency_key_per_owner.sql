-- Idempotency keys are per owner: one owner's key says nothing about
-- another's (a global unique key let anyone learn whether another tenant had
-- used a key, and took it from them), and their length is a named rule (a
-- key over 8 KB failed with the raw "index row size" error).
-- pgfleet.submit looks the key up among the caller's own jobs.
drop index if exists pgfleet."idempotency_key must be unique";
create unique index if not exists "idempotency_key must be unique per owner"
  on pgfleet.jobs (owner, idempotency_key) where idempotency_key is not null;

-- What depends on the column is made again by sql/ (090_security.sql).
drop view if exists pgfleet.visible_jobs;
create domain pgfleet.spec_idempotency_key as text
  constraint "idempotency_key must be 1-256 bytes" check (octet_length(value) between 1 and 256);
alter table pgfleet.jobs alter column idempotency_key type pgfleet.spec_idempotency_key;
comment on column pgfleet.jobs.idempotency_key is
  'Optional key, unique among its owner''s jobs (1-256 bytes): pgfleet.submit with a key its owner used before returns that job and creates nothing.';
