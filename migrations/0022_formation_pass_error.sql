-- Why a formation's scheduling pass keeps failing, on its row: schedulers
-- back off such a formation (100 ms doubling to 60 s) and say why here.
alter table pgfleet.formations
  add column pass_error text,
  add column pass_failures integer not null default 0,
  add column pass_failed_at timestamptz;
comment on column pgfleet.formations.pass_error is
  'Why the last scheduling pass of this formation failed (null when the last one worked). Schedulers retry it after 100 ms doubling to 60 s.';
comment on column pgfleet.formations.pass_failures is 'Scheduling passes of this formation that failed in a row (0 when the last one worked).';
comment on column pgfleet.formations.pass_failed_at is 'When the last failed pass failed.';
