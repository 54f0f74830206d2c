-- Discovery is a query (issue 37): where each formation's running jobs
-- listen, as the caller may see them (built on visible_jobs, a security
-- barrier: a submitter sees its own jobs' endpoints only).
drop view if exists pgfleet.endpoints;
create view pgfleet.endpoints with (security_barrier = true) as
select j.formation, j.id as job, j.attempt, j.host_id as host,
       -- the host's address, as its API URL names it: where the port is mapped
       coalesce(substring(h.api_url from '^[A-Za-z][A-Za-z0-9+.-]*://\[([^]]+)\]'),
                substring(h.api_url from '^[A-Za-z][A-Za-z0-9+.-]*://([^/:]+)')) as address,
       p.name as port_name, p.port, j.network, j.address as job_address,
       case when j.health_check is null then 'none' else j.health end as health,
       j.started_at as since
  from pgfleet.visible_jobs j
  join pgfleet.hosts h on h.id = j.host_id
  left join pgfleet.job_ports p on p.job_id = j.id and p.attempt = j.attempt and p.host_id = j.host_id
 where j.state = 'running' and j.desired_state = 'run'
   and (p.port is not null or j.address is not null);
comment on view pgfleet.endpoints is
  'Where running jobs listen, one row per named port (or one row without a port for a bridge job with none): formation, job, attempt, host, address (the host''s, from its API URL: where the port is mapped), port_name and port (the host port, also what the job listens on), network, job_address (its own address on the host''s bridge, reachable from the host and its other jobs at the same port), health (none without a check) and since (when the attempt started). Only jobs the caller may see. LISTEN pgfleet_endpoints after pgfleet.watch_endpoints to hear of changes.';

grant select on pgfleet.endpoints
  to pgfleet_submitter, pgfleet_reader, pgfleet_scheduler, pgfleet_operator;

-- The ports held (migration 0033), granted here, after 090_security.sql
-- revoked every table's grants: schedulers write them (assign_jobs),
-- readers and operators see them; submitters see their own in endpoints.
grant select, insert, delete on pgfleet.job_ports to pgfleet_scheduler;
grant select on pgfleet.job_ports to pgfleet_reader, pgfleet_operator;
