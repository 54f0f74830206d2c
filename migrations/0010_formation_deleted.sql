-- A deleted formation keeps its row while its jobs' history remains (jobs
-- name their formation); it takes no new jobs, schedules nothing, and is
-- left out of formation_status. pgfleet.delete_formation sets it.
alter table pgfleet.formations add column deleted_at timestamptz;
comment on column pgfleet.formations.deleted_at is
  'When pgfleet.delete_formation deleted it (its jobs were stopped; their history stays); null while it is in use. Creating the formation again clears it.';
-- The jobs insert trigger asks "is any formation deleted?" per statement.
create index formations_deleted_idx on pgfleet.formations (id) where deleted_at is not null;
