-- bench/limits_ab.sh: a quota for the burst's owner (the benchmark's login)
-- far above what it can use: every pass reads it and assign_jobs locks and
-- counts it (the mechanism's cost alone).
insert into pgfleet.owner_quotas (owner, max_cpu, max_memory, max_running)
values (current_user, 2000000000, 2000000000, 10000000);
