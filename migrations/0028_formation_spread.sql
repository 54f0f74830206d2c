-- Spread: a formation's jobs over hosts, or over the values of a host label,
-- instead of packed onto the fewest hosts (core/placement/placement.h,
-- JobRequest::spread). Null packs them, as before.
create domain pgfleet.formation_spread as text
  constraint "spread must be host or a host label key of 1-63 of A-Z a-z 0-9 . _ / -"
    check (value ~ '^[A-Za-z0-9._/-]{1,63}$');

alter table pgfleet.formations add column spread pgfleet.formation_spread;

comment on column pgfleet.formations.spread is
  'How the formation''s jobs share hosts: null packs them onto the fewest hosts (bin-packing, the default); ''host'' puts one on each host before any host gets a second; a host label key (e.g. ''zone'') spreads them over that label''s values as evenly as capacity allows, hosts without the label sharing one value. Counted from where its assigned and running jobs are.';
