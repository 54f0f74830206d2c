-- A host's condition: what it says stops it from taking new work (today only
-- disk pressure, hostd --disk-full-percent), written by every heartbeat.
-- Schedulers place nothing on a host with a condition; its jobs keep running.
alter table pgfleet.host_heartbeats
  add column condition text
    constraint "condition must be at most 1000 bytes" check (octet_length(condition) <= 1000);
comment on column pgfleet.host_heartbeats.condition is
  'Why the host takes no new work now, as it said in its latest heartbeat (e.g. ''disk pressure: ...''); null when it takes work.';
