-- Health checks of service and system replicas (issue 36), run by hostd
-- (hostd/health/): a command inside the job, an HTTP GET or a TCP connect,
-- every interval_seconds, each given timeout_seconds; unhealthy after
-- failure_threshold failures in a row (the replica is then restarted),
-- healthy after one success, none during grace_seconds after the start.
-- The same rules as core/model/health_check.h, each a named CHECK.
create domain pgfleet.spec_health_check as jsonb
  constraint "health_check must be an object of at most 16384 bytes"
    check (jsonb_typeof(value) = 'object' and octet_length(value::text) <= 16384)
  constraint "health_check has only known fields (see spec_health_check)"
    check (case when jsonb_typeof(value) = 'object'
                then value - array['type', 'command', 'port', 'path', 'interval_seconds',
                                   'timeout_seconds', 'failure_threshold', 'grace_seconds']
                     = '{}'::jsonb
                else true end)
  constraint "health_check.type must be command, http or tcp"
    check (jsonb_typeof(value) <> 'object'
           or coalesce(value ->> 'type' in ('command', 'http', 'tcp'), false))
  constraint "health_check.command must be 1-64 strings, for type command"
    check (jsonb_typeof(value) <> 'object' or
           case when value ->> 'type' = 'command'
                then coalesce(jsonb_typeof(value -> 'command') = 'array'
                     and case when jsonb_typeof(value -> 'command') = 'array'
                              then jsonb_array_length(value -> 'command') between 1 and 64 end
                     and not jsonb_path_exists(value -> 'command', '$[*] ? (@.type() != "string")')
                     and value -> 'command' ->> 0 <> ''
                     and octet_length((value -> 'command')::text) <= 8192, false)
                else not value ? 'command' end)
  constraint "health_check.port must be 1-65535, for type http or tcp"
    check (jsonb_typeof(value) <> 'object' or
           case when value ->> 'type' in ('http', 'tcp')
                then case when jsonb_typeof(value -> 'port') = 'number'
                          then (value ->> 'port')::numeric between 1 and 65535
                               and (value ->> 'port')::numeric % 1 = 0
                          else false end
                else not value ? 'port' end)
  constraint "health_check.path must be /printable ASCII, for type http"
    check (jsonb_typeof(value) <> 'object' or not value ? 'path' or
           case when value ->> 'type' = 'http' and jsonb_typeof(value -> 'path') = 'string'
                then value ->> 'path' ~ '^/[!-~]*$' and octet_length(value ->> 'path') <= 1024
                else false end)
  constraint "health_check.interval_seconds must be between 1 and 86400"
    check (jsonb_typeof(value) <> 'object' or
           case when jsonb_typeof(value -> 'interval_seconds') = 'number'
                then (value ->> 'interval_seconds')::numeric between 1 and 86400
                     and (value ->> 'interval_seconds')::numeric % 1 = 0
                else coalesce(jsonb_typeof(value -> 'interval_seconds'), 'null') = 'null' end)
  constraint "health_check.timeout_seconds must be between 1 and 3600"
    check (jsonb_typeof(value) <> 'object' or
           case when jsonb_typeof(value -> 'timeout_seconds') = 'number'
                then (value ->> 'timeout_seconds')::numeric between 1 and 3600
                     and (value ->> 'timeout_seconds')::numeric % 1 = 0
                else coalesce(jsonb_typeof(value -> 'timeout_seconds'), 'null') = 'null' end)
  constraint "health_check.failure_threshold must be between 1 and 100"
    check (jsonb_typeof(value) <> 'object' or
           case when jsonb_typeof(value -> 'failure_threshold') = 'number'
                then (value ->> 'failure_threshold')::numeric between 1 and 100
                     and (value ->> 'failure_threshold')::numeric % 1 = 0
                else coalesce(jsonb_typeof(value -> 'failure_threshold'), 'null') = 'null' end)
  constraint "health_check.grace_seconds must be between 0 and 86400"
    check (jsonb_typeof(value) <> 'object' or
           case when jsonb_typeof(value -> 'grace_seconds') = 'number'
                then (value ->> 'grace_seconds')::numeric between 0 and 86400
                     and (value ->> 'grace_seconds')::numeric % 1 = 0
                else coalesce(jsonb_typeof(value -> 'grace_seconds'), 'null') = 'null' end);
comment on domain pgfleet.spec_health_check is
  'A replica''s health check: {"type":"command","command":[...]}, {"type":"http","port":N,"path":"/..."} or {"type":"tcp","port":N}, with interval_seconds (default 10), timeout_seconds (2), failure_threshold (3), grace_seconds (0). Null: no check.';

alter table pgfleet.jobs add column health_check pgfleet.spec_health_check;
alter table pgfleet.formations add column health_check pgfleet.spec_health_check;
comment on column pgfleet.jobs.health_check is
  'The health check hostd runs on the replica (pgfleet.spec_health_check); null = none (health stays unknown). A replica unhealthy past its failure_threshold is stopped and restarted.';
comment on column pgfleet.formations.health_check is
  'The replicas'' health check (pgfleet.jobs.health_check).';

-- What the checks found, for the current attempt only, written by
-- pgfleet.report_jobs only when it changes (a healthy fleet costs no writes).
alter table pgfleet.jobs
  add column health text not null default 'unknown'
    constraint "health must be unknown, healthy or unhealthy"
      check (health in ('unknown', 'healthy', 'unhealthy')),
  add column health_at timestamptz,
  add column health_output text
    constraint "health_output must be at most 4096 bytes"
      check (octet_length(health_output) <= 4096);
comment on column pgfleet.jobs.health is
  'The current attempt''s health: unknown (no check, not checked yet, or a new attempt), healthy (its last check passed) or unhealthy (failure_threshold checks failed in a row). Changed only by hostd''s health reports.';
comment on column pgfleet.jobs.health_at is
  'When health last changed (the database''s clock); null while unknown.';
comment on column pgfleet.jobs.health_output is
  'The output of the check result that last changed health (at most 4096 bytes, valid UTF-8).';

-- pgfleet.submit gets a health_check parameter (sql/011_submit.sql): the
-- old signature goes first, or the new one would be an ambiguous overload.
drop function if exists pgfleet.submit(text[], text, integer, integer, jsonb, jsonb, integer,
                                       integer, text, text, text, text, integer, boolean, integer,
                                       integer, text);
