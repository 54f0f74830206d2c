-- What a scheduler keeps of a host between passes (its labels, API URL,
-- driver and ticket key) is read again only when this number changes: the
-- per-pass snapshot reads just capacity, allocations and condition, and the
-- scheduler parses no labels (docs/decisions/0009). Bumped by triggers
-- (sql/020_triggers.sql), whoever writes the row: register_host, an operator's
-- UPDATE of labels, a new key in pgfleet.host_keys.
alter table pgfleet.hosts add column config_version bigint not null default 1;
comment on column pgfleet.hosts.config_version is
  'Bumped whenever labels, api_url, driver or the host''s ticket key (pgfleet.host_keys) change: schedulers read those again only then.';
