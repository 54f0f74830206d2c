-- Networking for services (issue 37): a bridge network per job, set up by
-- hostd through the standard CNI plugins; named ports allocated per host by
-- the schedulers; endpoints found with a query (pgfleet.endpoints).

-- network bridge: the job's own network namespace with an address on a
-- host-local bridge and outbound NAT (hostd/network/). Any submitter may
-- ask for it; host stays privileged (pgfleet.privilege_problem).
alter domain pgfleet.spec_network drop constraint "network must be 'host' or 'none'";
alter domain pgfleet.spec_network add constraint "network must be 'host', 'none' or 'bridge'"
  check (value in ('host', 'none', 'bridge'));
comment on domain pgfleet.spec_network is
  'host (share the host''s network: privileged), none (a network namespace of its own with loopback only) or bridge (its own namespace with an address on the host''s bridge, outbound NAT and its ports mapped).';

-- Named ports: {"http": 0, "metrics": 9100}. 0 asks for any free port of
-- the host's port_range, a number for that host port (privileged below
-- 1024; an unprivileged one must lie in the host's port_range). Names are
-- what the job's environment says (PGFLEET_PORT_HTTP): lower case, so two
-- names never make one variable. (A jsonb object keeps the last of two
-- equal keys: the CLI refuses a repeated --port name; SQL cannot see it.)
-- Helpers of the domain's rules (a domain's CHECK takes no subquery),
-- defined again in sql/023_network.sql (sql/ owns every function).
create function pgfleet.ports_count(p_ports jsonb) returns integer
language sql immutable as $$ select count(*)::integer from jsonb_object_keys(p_ports) $$;
comment on function pgfleet.ports_count(jsonb) is 'How many names an object of ports has.';
create function pgfleet.ports_repeat_a_number(p_ports jsonb) returns boolean
language sql immutable as $$
  select exists (select 1 from jsonb_each(p_ports) e
                  where jsonb_typeof(e.value) = 'number' and e.value <> '0'
                  group by e.value having count(*) > 1)
$$;
comment on function pgfleet.ports_repeat_a_number(jsonb) is
  'Whether an object of ports names one port number (other than 0) twice.';

create domain pgfleet.spec_ports as jsonb
  constraint "ports must be an object of at most 32 names"
    check (jsonb_typeof(value) = 'object' and pgfleet.ports_count(value) <= 32)
  constraint "ports names must match ^[a-z][a-z0-9_]{0,31}$"
    check (jsonb_typeof(value) <> 'object'
           or not jsonb_path_exists(value,
                '$.keyvalue() ? (!(@.key like_regex "^[a-z][a-z0-9_]{0,31}$"))'))
  constraint "ports must be whole numbers from 0 to 65535 (0: any)"
    check (jsonb_typeof(value) <> 'object'
           or not jsonb_path_exists(value,
                '$.* ? (@.type() != "number" || @ < 0 || @ > 65535 || @ != @.floor())'))
  constraint "ports must not name one port number twice"
    check (jsonb_typeof(value) <> 'object' or not pgfleet.ports_repeat_a_number(value));
comment on domain pgfleet.spec_ports is
  'A job''s named ports: {"name": port}, names ^[a-z][a-z0-9_]{0,31}$ (at most 32), 0 = any free port of the host''s port_range, N = host port N (below 1024 privileged; unprivileged only inside the host''s port_range). The job sees PGFLEET_PORT_<NAME> and PGFLEET_ADDR_<NAME>.';

alter table pgfleet.jobs
  add column ports pgfleet.spec_ports,
  add column host_ports jsonb,
  add column address inet;
alter table pgfleet.formations add column ports pgfleet.spec_ports;
comment on column pgfleet.jobs.ports is
  'The named ports the job asks for (pgfleet.spec_ports); null = none.';
comment on column pgfleet.jobs.host_ports is
  'The host ports its latest attempt was given, {"name": port} (the schedulers write it with the assignment; pgfleet.job_ports holds them while the attempt lives).';
comment on column pgfleet.jobs.address is
  'The latest attempt''s own address (network bridge), as hostd reported it when the attempt started; null for other networks.';
comment on column pgfleet.formations.ports is 'The replicas'' named ports (pgfleet.jobs.ports).';

-- The ports held on each host: one row per port of a live (assigned or
-- running) attempt, and its primary key makes the database sure that no
-- host port is ever given twice. Written in assign_jobs under the host's
-- row lock with its cpu and memory; removed when the attempt ends (the
-- trigger jobs_release_ports) or the job (jobs_after_delete) or host goes.
create table pgfleet.job_ports (
  host_id text not null references pgfleet.hosts (id) on delete cascade,
  port integer not null
    constraint "port must be between 1 and 65535" check (port between 1 and 65535),
  -- no foreign key (as job_events, migration 0014): jobs_after_delete
  -- removes a deleted job's rows, and TRUNCATE of jobs stays possible
  job_id bigint not null,
  attempt integer not null,
  name text not null,
  primary key (host_id, port)
);
create index job_ports_job_idx on pgfleet.job_ports (job_id);
comment on table pgfleet.job_ports is
  'Host ports held by live attempts: (host, port) is unique, so two jobs never get one port. Written with the assignment (pgfleet.assign_jobs), removed when the attempt ends.';
comment on column pgfleet.job_ports.host_id is 'The host whose port it is.';
comment on column pgfleet.job_ports.port is 'The host port.';
comment on column pgfleet.job_ports.job_id is 'The job holding it.';
comment on column pgfleet.job_ports.attempt is 'The attempt holding it.';
comment on column pgfleet.job_ports.name is 'The job''s name for it (a key of jobs.ports).';

-- What each host offers: its port range for port 0 and unprivileged static
-- ports (hostd --port-range), and the networks it can give (bridge only
-- where its CNI plugins and configuration work; network_note says why not).
alter table pgfleet.hosts
  add column port_range int4range not null default int4range(20000, 32001)
    constraint "port_range must be within 1024-65535 and not empty"
      check (not isempty(port_range) and lower(port_range) >= 1024 and upper(port_range) <= 65536
             and not lower_inf(port_range) and not upper_inf(port_range)),
  add column networks text[] not null default '{host,none}'
    constraint "networks must be among host, none and bridge"
      check (networks <@ '{host,none,bridge}'),
  add column network_note text
    constraint "network_note must be at most 1000 bytes" check (octet_length(network_note) <= 1000);
comment on column pgfleet.hosts.port_range is
  'The host ports jobs may be given: any for port 0, and the only ones an unprivileged job may name (hostd --port-range; default 20000-32000).';
comment on column pgfleet.hosts.networks is
  'The networks the host can give its jobs (host, none, bridge); a job whose network is not among them is not placed there.';
comment on column pgfleet.hosts.network_note is
  'Why the host offers no bridge network (e.g. a CNI plugin missing), as hostd found at registration; null when it does.';

-- Sessions following endpoints (pgfleet endpoints --watch): a change of a
-- formation's endpoints NOTIFYs pgfleet_endpoints with its name only while
-- one watches (as job_waiters). formation null: every formation it may see.
create unlogged table pgfleet.endpoint_watchers (
  pid integer not null,
  formation text,
  since timestamptz not null default now()
);
create unique index endpoint_watchers_idx on pgfleet.endpoint_watchers (pid, coalesce(formation, ''));
comment on table pgfleet.endpoint_watchers is
  'Sessions (backend pid) following the endpoints of a formation (null: all): pgfleet.watch_endpoints adds rows, pgfleet.unwatch_endpoints removes them.';
comment on column pgfleet.endpoint_watchers.pid is 'The watching session''s backend pid.';
comment on column pgfleet.endpoint_watchers.formation is 'The formation followed; null: every formation.';
comment on column pgfleet.endpoint_watchers.since is 'When it began watching.';

-- The old signatures go first (new ones would be ambiguous overloads).
drop function if exists pgfleet.register_host(text, text, integer, integer, jsonb, text, text);
-- Every caller is re-created by sql/ with the ports argument.
drop function if exists pgfleet.privilege_problem(text, text, text, text);
drop function if exists pgfleet.submit(text[], text, integer, integer, jsonb, jsonb, integer,
                                       integer, text, text, text, text, integer, boolean, integer,
                                       integer, text, jsonb);
