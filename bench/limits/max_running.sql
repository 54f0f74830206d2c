-- bench/limits_ab.sh: the burst's formation limited, so far above the burst
-- that the limit never binds: every pass counts the formation's jobs in
-- flight and assign_jobs checks them (the mechanism's cost alone).
update pgfleet.formations set max_running = 100000 where name = 'default';
