-- submit takes preemptible (sql/011_submit.sql, `pgfleet run --preemptible`):
-- the old signature goes first (the new one would be an ambiguous overload).
drop function if exists pgfleet.submit(text[], text, integer, integer, jsonb, jsonb, integer,
                                       integer, text, text, text, text, integer, boolean, integer,
                                       integer, text, jsonb, jsonb, bigint[], timestamptz, jsonb);
