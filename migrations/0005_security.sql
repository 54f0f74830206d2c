-- Security (docs/security.md): who submitted each job and each formation,
-- whether that submitter could ask for privileged features, and which
-- database login may act for which host. The roles, grants and row-level
-- security policies are in sql/090_security.sql (re-applied on every migrate).
alter table pgfleet.jobs
  add column owner text not null default current_user,
  add column privileged boolean not null default false;
comment on column pgfleet.jobs.owner is
  'Database role that submitted the job (pgfleet.caller()): a pgfleet_submitter sees and cancels only its own jobs. Replicas are owned by their formation''s owner.';
comment on column pgfleet.jobs.privileged is
  'True when the submitter was a member of pgfleet_privileged: only then may the job run as root, share the host network or name a rootfs path, and only then may a process-driver host (no isolation) run it.';

alter table pgfleet.formations
  add column owner text not null default current_user,
  add column privileged boolean not null default false;
comment on column pgfleet.formations.owner is 'Database role that created the formation; its replicas are owned by it.';
comment on column pgfleet.formations.privileged is
  'True when the last writer of the job template was a member of pgfleet_privileged; replicas inherit it.';

create table pgfleet.host_logins (
  login text not null,
  host_id text not null
    constraint "host id must be 1-100 of A-Z a-z 0-9 . _ -" check (host_id ~ '^[A-Za-z0-9._-]{1,100}$'),
  created_at timestamptz not null default now(),
  primary key (login, host_id)
);
comment on table pgfleet.host_logins is
  'Which database login (a member of pgfleet_host) may register, heartbeat and report for which host. Written by operators; a host login with no row here can act for no host.';
comment on column pgfleet.host_logins.login is 'Database login of a hostd (member of pgfleet_host).';
comment on column pgfleet.host_logins.host_id is 'Host id that login may act for (hostd --id).';
comment on column pgfleet.host_logins.created_at is 'When the binding was made.';
