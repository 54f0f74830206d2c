-- Each host's ticket key (core/net/ticket.h): hostd makes it once, keeps it
-- in its data directory and registers it here; schedulers sign dispatch and
-- stop tickets with it, pgfleet.log_ticket signs log tickets. Only the
-- schema's owner and schedulers read it.
create table pgfleet.host_keys (
  host_id text primary key references pgfleet.hosts (id) on delete cascade,
  key bytea not null constraint "a host key is 32 bytes" check (length(key) = 32),
  set_at timestamptz not null default now()
);
comment on table pgfleet.host_keys is
  'Each host''s ticket key (HMAC-SHA256, 32 bytes), registered by its hostd (pgfleet.set_host_key). Readable by schedulers only.';
comment on column pgfleet.host_keys.host_id is 'The host (pgfleet.hosts.id); the key goes with the host.';
comment on column pgfleet.host_keys.key is 'HMAC-SHA256 key, 32 random bytes made by the host''s hostd (data-dir/ticket.key).';
comment on column pgfleet.host_keys.set_at is 'When this key was registered (a new key replaces the old).';
