-- A database or pooler outage never declares the fleet lost
-- (pgfleet.sweep_lost_hosts, sql/015_failures.sql): heartbeat ages count from
-- the database's start and the sweeping session's start at the earliest, a
-- sweep that would lose more than a share of the fleet at once loses none,
-- and losses are rate-limited. What the guard decided is kept here, where an
-- operator sees it, and its changes in pgfleet.host_loss_events.

alter table pgfleet.hosts add column lost_at timestamptz;
comment on column pgfleet.hosts.lost_at is
  'When a sweep last declared this host lost (the rate limit counts these over the last minute); null if never.';

-- One row: what the last sweep that found silent hosts decided.
create table pgfleet.host_loss_guard (
  id boolean primary key default true
    constraint "host_loss_guard has one row" check (id),
  held_since timestamptz,
  held_hosts integer not null default 0,
  of_hosts integer not null default 0,
  waiting_for_rate integer not null default 0,
  updated_at timestamptz not null default now()
);
insert into pgfleet.host_loss_guard default values;
comment on table pgfleet.host_loss_guard is
  'The lost-host sweep''s guard, one row: whether it is holding a mass loss (held_since) and how many silent hosts wait for the loss rate limit. Written by pgfleet.sweep_lost_hosts only.';
comment on column pgfleet.host_loss_guard.id is 'Always true: the table has one row.';
comment on column pgfleet.host_loss_guard.held_since is
  'Since when more than host_loss_guard_share of the hosts (and at least host_loss_guard_min_hosts) have been silent at once, so none is declared lost (a control-plane outage is the likelier cause); null when not holding.';
comment on column pgfleet.host_loss_guard.held_hosts is 'Silent hosts the guard holds now (0 when not holding).';
comment on column pgfleet.host_loss_guard.of_hosts is 'Hosts that were not lost when the hold was last judged.';
comment on column pgfleet.host_loss_guard.waiting_for_rate is
  'Silent hosts not yet declared lost because host_losses_per_minute was reached (0 when none).';
comment on column pgfleet.host_loss_guard.updated_at is 'When a sweep last changed this row.';

create table pgfleet.host_loss_events (
  id bigint generated always as identity primary key,
  at timestamptz not null default now(),
  kind text not null
    constraint "kind must be held, resumed or rate_limited"
      check (kind in ('held', 'resumed', 'rate_limited')),
  silent_hosts integer not null,
  of_hosts integer not null,
  detail text not null
);
comment on table pgfleet.host_loss_events is
  'What the lost-host sweep''s guard did, one row per change: held (a mass loss was not declared), resumed (hosts are judged one by one again), rate_limited (silent hosts wait for host_losses_per_minute).';
comment on column pgfleet.host_loss_events.id is 'Order of the events.';
comment on column pgfleet.host_loss_events.at is 'When the sweep decided.';
comment on column pgfleet.host_loss_events.kind is 'held, resumed or rate_limited.';
comment on column pgfleet.host_loss_events.silent_hosts is 'Hosts past the heartbeat TTL when the sweep decided.';
comment on column pgfleet.host_loss_events.of_hosts is 'Hosts not lost when the sweep decided.';
comment on column pgfleet.host_loss_events.detail is 'The decision in words, with the numbers and the settings that made it.';
