-- Host admission (issue 34): a host gets jobs only once admitted, and only
-- as much capacity and such labels as were admitted. Admins' hosts and
-- those of a login an operator marked auto_admit are admitted when they
-- register; others wait for pgfleet.admit_host. Hosts registered before
-- this migration are admitted, with no allowance (they keep what they
-- declare).
alter table pgfleet.hosts
  add column admitted boolean not null default true,
  add column admitted_at timestamptz,
  add column admitted_by text,
  add column declared_cpu integer,
  add column declared_memory integer,
  add column declared_labels jsonb,
  add column allowed_cpu integer,
  add column allowed_memory integer,
  add column allowed_labels jsonb;
comment on column pgfleet.hosts.admitted is
  'Whether the host may get jobs: set when an admin''s or an auto_admit login''s hostd registers it, or by pgfleet.admit_host.';
comment on column pgfleet.hosts.admitted_at is 'When it was admitted (null: before admission existed, or not yet).';
comment on column pgfleet.hosts.admitted_by is 'Who admitted it: an operator, or "login X (auto_admit)", or "admin X".';
comment on column pgfleet.hosts.declared_cpu is 'Millicores the host last declared (hostd --cpu); cpu is this within allowed_cpu.';
comment on column pgfleet.hosts.declared_memory is 'MiB the host last declared (hostd --memory); memory is this within allowed_memory.';
comment on column pgfleet.hosts.declared_labels is 'Labels the host last declared (hostd --label); labels are those of them allowed_labels holds.';
comment on column pgfleet.hosts.allowed_cpu is 'Most millicores the host may offer, set at admission; null = what it declares.';
comment on column pgfleet.hosts.allowed_memory is 'Most MiB the host may offer, set at admission; null = what it declares.';
comment on column pgfleet.hosts.allowed_labels is 'The labels (key and value) the host may claim, set at admission; null = any it declares.';

alter table pgfleet.host_logins add column auto_admit boolean not null default false;
comment on column pgfleet.host_logins.auto_admit is
  'Hosts this login registers are admitted at once, with what they declare: trusting that machine as an operator would.';
