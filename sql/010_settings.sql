-- Functions re-created on every `pgfleet migrate`, one file per concern, in
-- file-name order (a function that another file's SQL-language body or view
-- calls is defined in an earlier file). This one: the facts and small rules the
-- other files share. Every job state transition in pgfleet goes through one of
-- the functions of sql/: a guarded UPDATE (expected state, attempt and host),
-- one job_events row, and the host's allocated resources adjusted in the same
-- statement or transaction. A function that sql/ no longer defines is dropped
-- by `pgfleet migrate`.

-- schema_migrations is created by the migrate runner (core/db/migrate.cpp) before
-- any migration runs, so it is documented here, re-applied on every migrate.
comment on table pgfleet.schema_migrations is
  'Migrations of migrations/ already applied to this database, one row each; written by `pgfleet migrate`.';
comment on column pgfleet.schema_migrations.name is 'File name of the applied migration, e.g. 0001_init.sql.';
comment on column pgfleet.schema_migrations.applied_at is 'When it was applied.';

-- Facts shared with the daemons: each equals a constant of core/model/constants.h,
-- and tests/integration/constants_test.cpp checks that both sides agree.

create or replace function pgfleet.lock_class() returns integer
language sql immutable parallel safe as $$ select 1885824628 $$;  -- 0x70676674, 'pgft'
comment on function pgfleet.lock_class() is
  'First key of every pgfleet advisory lock (two-integer form). Equals kLockClass in core/model/constants.h.';

-- How hosts run jobs (hosts.driver): core/model/driver_kind.h DriverKind and
-- its capabilities, the ones the database needs.
create or replace function pgfleet.driver_kinds() returns text[]
language sql immutable parallel safe as $$ select array['process', 'container', 'sim'] $$;
comment on function pgfleet.driver_kinds() is
  'The drivers a host may run jobs with (hosts.driver), as model::DriverKindName names them (core/model/driver_kind.h).';
create or replace function pgfleet.driver_isolates(p_driver text) returns boolean
language sql immutable parallel safe as $$ select p_driver in ('container', 'sim') $$;
comment on function pgfleet.driver_isolates(text) is
  'Whether a host of that driver isolates jobs, so unprivileged ones may be placed on it (model::DriverCapabilities::isolates).';

create or replace function pgfleet.work_channel() returns text
language sql immutable parallel safe as $$ select 'pgfleet_work' $$;
comment on function pgfleet.work_channel() is
  'Channel of every pgfleet NOTIFY that wakes the schedulers; the payload is a formation id or pgfleet.all_formations(). Equals kWorkChannel in core/model/constants.h.';

create or replace function pgfleet.all_formations() returns text
language sql immutable parallel safe as $$ select '*' $$;
comment on function pgfleet.all_formations() is
  'Payload of a pgfleet.work_channel() NOTIFY when capacity changed and every formation with pending jobs should be retried. Equals kAllFormations in core/model/constants.h.';

create or replace function pgfleet.idle_lock_key() returns integer
language sql immutable parallel safe as $$ select -3 $$;
comment on function pgfleet.idle_lock_key() is
  'Second key of the idle-schedulers advisory lock (first key pgfleet.lock_class()): a sleeping scheduler holds it exclusively; pgfleet.wake_schedulers() notifies only then. Equals kIdleLockKey in core/model/constants.h.';

-- Asked before every NOTIFY that wakes the schedulers. Every scheduler busy
-- (none holds the idle lock exclusively): false, and no NOTIFY, which would
-- serialize this commit with every other notifying one. The shared lock lasts
-- until this transaction ends, so a scheduler that goes to sleep gets its
-- exclusive lock only after this commits, and then looks at everything once
-- before sleeping. A SQL function, inlined: PL/pgSQL callers evaluate it as
-- a simple expression, with no statement of its own.
create or replace function pgfleet.schedulers_sleep() returns boolean
language sql volatile as $$
  select not pg_try_advisory_xact_lock_shared(pgfleet.lock_class(), pgfleet.idle_lock_key())
$$;
comment on function pgfleet.schedulers_sleep() is
  'True when some scheduler sleeps holding the idle lock (pgfleet.idle_lock_key()), so a change must NOTIFY it; false otherwise, having taken that lock shared until commit (a scheduler going to sleep then looks at everything once first).';

create or replace function pgfleet.notify_schedulers(p_payloads text[]) returns void
language plpgsql as $$
begin
  perform pg_notify(pgfleet.work_channel(), p) from unnest(p_payloads) p;
end $$;
comment on function pgfleet.notify_schedulers(text[]) is
  'NOTIFYs pgfleet.work_channel() once per payload (formation ids or pgfleet.all_formations()); callers ask pgfleet.schedulers_sleep() first.';

create or replace function pgfleet.wake_schedulers(p_payloads text[]) returns void
language plpgsql as $$
begin
  if pgfleet.schedulers_sleep() then
    perform pgfleet.notify_schedulers(p_payloads);
  end if;
end $$;
comment on function pgfleet.wake_schedulers(text[]) is
  'Wakes sleeping schedulers about these formation ids (or pgfleet.all_formations()): NOTIFYs pgfleet.work_channel() only when a scheduler sleeps holding the idle lock (pgfleet.schedulers_sleep); otherwise takes that lock shared until commit.';

create or replace function pgfleet.host_loss_limit() returns integer
language sql immutable parallel safe as $$ select 3 $$;
comment on function pgfleet.host_loss_limit() is
  'A job whose attempts were lost with this many hosts fails (it may be what kills them). Equals kHostLossLimit in core/model/constants.h.';

create or replace function pgfleet.setting(p_name text, p_default text) returns text
language sql stable as $$
  select coalesce((select value from pgfleet.settings where name = p_name), p_default)
$$;
comment on function pgfleet.setting(text, text) is 'A value of pgfleet.settings, or the given default.';

-- Every setting pgfleet reads, with its type, range and default: a row of
-- pgfleet.settings is checked against its rule when written
-- (settings_check, sql/020_triggers.sql), so a typo is refused with the rule
-- instead of failing every scheduler pass that reads it.
create or replace function pgfleet.setting_rules()
returns table (name text, kind text, min_value numeric, max_value numeric, default_value text,
               description text)
language sql immutable as $$
  values
    ('host_ttl_seconds', 'number', 1::numeric, 86400::numeric, '10',
     'How long a host may go without a heartbeat before it is lost.'),
    ('max_replicas', 'integer', 0, 1000000, '10000',
     'Most replicas a formation may ask for.'),
    ('host_loss_guard_share', 'number', 0.01, 1, '0.55',
     'A sweep that would declare more than this share of the hosts lost at once declares none (a control-plane outage is likelier); 1 turns the guard off.'),
    ('host_loss_guard_min_hosts', 'integer', 1, 1000000, '3',
     'The guard holds only when at least this many hosts are silent at once.'),
    ('host_losses_per_minute', 'integer', 1, 1000000, '10',
     'Hosts declared lost in any minute: at most the larger of this and host_losses_per_minute_share of the hosts.'),
    ('host_losses_per_minute_share', 'number', 0, 1, '0.1',
     'Share of the hosts that may be declared lost in any minute (see host_losses_per_minute).'),
    ('max_pids', 'integer', 1024, 4194304, '4096',
     'Most processes a job may ask for (pids_max), refused at insert above it: one job must not take the host''s PID space.'),
    ('max_stop_grace_seconds', 'integer', 10, 86400, '300',
     'Longest stop_grace_seconds a job may ask for, refused at insert above it: a job that ignores SIGTERM ends within it.'),
    ('max_disk_mib', 'integer', 1, 16777216, '10240',
     'Most disk (MiB) a job may ask for, refused at insert above it.'),
    ('max_log_mib', 'integer', 2, 104857600, '2048',
     'Most output a job may keep on its host (log_max_files x log_max_file_mb, MiB), refused at insert above it.'),
    ('max_priority', 'integer', 50, 100, '50',
     'Highest priority a job or formation template may ask for, refused above it (owners that are operators or admins excepted): higher priority takes capacity, and preempts, ahead of others.'),
    ('cron_seconds_field', 'integer', 0, 1, '0',
     'For tests: 1 lets a cron formation''s expression lead with a 6th field of seconds (docs/cron.md); 0 refuses it, so no formation runs more than once a minute.')
$$;
comment on function pgfleet.setting_rules() is
  'Every setting of pgfleet.settings: its name, kind (integer or number), allowed range, default and meaning. A written value is checked against it.';

-- Why `p_value` cannot be setting `p_name`, naming the rule; null when it can.
create or replace function pgfleet.setting_problem(p_name text, p_value text) returns text
language plpgsql immutable as $$
declare
  r record;
  v numeric;
  v_pattern text;
begin
  select * into r from pgfleet.setting_rules() s where s.name = p_name;
  if not found then
    return format('setting name must be one of %s (got "%s")',
                  (select string_agg(s.name, ', ' order by s.name) from pgfleet.setting_rules() s),
                  left(p_name, 100));
  end if;
  v_pattern := case r.kind when 'integer' then '^\s*-?[0-9]{1,20}\s*$'
                           else '^\s*-?[0-9]{1,20}(\.[0-9]{1,20})?\s*$' end;
  if p_value is null or p_value !~ v_pattern then
    return format('%s must be %s (got "%s")', p_name,
                  case r.kind when 'integer' then 'an integer' else 'a number' end,
                  left(coalesce(p_value, 'null'), 100));
  end if;
  v := p_value::numeric;
  if v < r.min_value or v > r.max_value then
    return format('%s must be between %s and %s (got %s)', p_name, r.min_value, r.max_value, p_value);
  end if;
  return null;
end $$;
comment on function pgfleet.setting_problem(text, text) is
  'Why a value cannot be the named setting (unknown name, wrong kind, out of range), naming the rule; null when it can.';

-- A setting's value in force: its row, or its rule's default.
create or replace function pgfleet.setting_number(p_name text) returns numeric
language sql stable as $$
  select coalesce((select s.value::numeric from pgfleet.settings s where s.name = p_name),
                  (select r.default_value::numeric from pgfleet.setting_rules() r where r.name = p_name))
$$;
comment on function pgfleet.setting_number(text) is
  'A numeric setting in force: its row of pgfleet.settings, else the default of pgfleet.setting_rules().';

-- The job ceilings an operator may also set per role (pgfleet.role_limits).
create or replace function pgfleet.job_ceiling_names() returns text[]
language sql immutable as $$
  select array['max_disk_mib', 'max_log_mib', 'max_pids', 'max_priority', 'max_stop_grace_seconds']
$$;
comment on function pgfleet.job_ceiling_names() is
  'The settings that are ceilings on one job (checked at insert by pgfleet.limit_problem), which pgfleet.role_limits may set per role.';

-- A job ceiling for jobs owned by p_role: its row of pgfleet.role_limits,
-- else the cluster's setting. {value, where it comes from}.
-- (PL/pgSQL: this file is applied before the migration that made
-- role_limits in the migration tests' older databases.)
create or replace function pgfleet.ceiling_for(p_role text, p_name text, out value numeric,
                                               out source text)
language plpgsql stable as $$
declare
  v_role_value text;
begin
  select r.value into v_role_value from pgfleet.role_limits r
   where r.role = p_role and r.name = p_name;
  if v_role_value is null then
    value := pgfleet.setting_number(p_name);
    source := format('setting %s', p_name);
  else
    value := v_role_value::numeric;
    source := format('%s for role %s in pgfleet.role_limits', p_name, p_role);
  end if;
end $$;
comment on function pgfleet.ceiling_for(text, text) is
  'A job ceiling (pgfleet.job_ceiling_names()) for jobs owned by a role: its pgfleet.role_limits row, else the setting in force; with where it comes from, for messages.';

-- The operator's ceilings on what a job may take of its host (settings
-- max_pids, max_stop_grace_seconds, max_disk_mib, max_log_mib, or the
-- owner's rows of pgfleet.role_limits), as {field, message}; null when
-- within. Values up to the columns' defaults never read the ceilings (whose
-- ranges start there): the common insert pays nothing.
create or replace function pgfleet.limit_problem(p_owner text, p_pids_max integer,
                                                 p_stop_grace_seconds integer, p_disk integer,
                                                 p_log_max_files integer, p_log_max_file_mb integer)
returns text[]
language plpgsql stable as $$
declare
  c record;
begin
  if p_pids_max > 1024 then
    select * into c from pgfleet.ceiling_for(p_owner, 'max_pids');
    if p_pids_max > c.value then
      return array['pids_max', format('pids_max must be <= %s (%s; got %s)', c.value, c.source, p_pids_max)];
    end if;
  end if;
  if p_stop_grace_seconds > 10 then
    select * into c from pgfleet.ceiling_for(p_owner, 'max_stop_grace_seconds');
    if p_stop_grace_seconds > c.value then
      return array['stop_grace_seconds',
                   format('stop_grace_seconds must be <= %s (%s; got %s)', c.value, c.source,
                          p_stop_grace_seconds)];
    end if;
  end if;
  if p_disk > 0 then
    select * into c from pgfleet.ceiling_for(p_owner, 'max_disk_mib');
    if p_disk > c.value then
      return array['disk', format('disk must be <= %s MiB (%s; got %s)', c.value, c.source, p_disk)];
    end if;
  end if;
  -- A cap left out is the host's (--log-max-files 5, --log-max-file-mb 20
  -- by default); the product of the two given, or of one given and the
  -- other's default, is what the job may keep.
  if p_log_max_files is not null or p_log_max_file_mb is not null then
    select * into c from pgfleet.ceiling_for(p_owner, 'max_log_mib');
    if coalesce(p_log_max_files, 5)::numeric * coalesce(p_log_max_file_mb, 20) > c.value then
      return array[case when p_log_max_file_mb is null then 'log_max_files' else 'log_max_file_mb' end,
                   format('log_max_files x log_max_file_mb must be <= %s MiB (%s; got %s x %s)',
                          c.value, c.source, coalesce(p_log_max_files::text, '5 (the host''s default)'),
                          coalesce(p_log_max_file_mb::text, '20 (the host''s default)'))];
    end if;
  end if;
  return null;
end $$;
comment on function pgfleet.limit_problem(text, integer, integer, integer, integer, integer) is
  'Which operator ceiling (settings max_pids, max_stop_grace_seconds, max_disk_mib, max_log_mib, or the owner''s pgfleet.role_limits) a job''s pids_max, stop_grace_seconds, disk or output caps are over, as {field, message}; null when within. Checked at insert of jobs (not of replicas, whose template was checked) and of formation templates.';

-- The priority ceiling (setting max_priority, or the owner's row of
-- pgfleet.role_limits) as {field, message}; null when within. Priorities
-- up to the default 50, where the ceiling's range starts, never read it; nor
-- do owners that are operators or admins, who may take any priority.
create or replace function pgfleet.priority_problem(p_owner text, p_priority integer) returns text[]
language plpgsql stable as $$
declare
  c record;
begin
  if p_priority is null or p_priority <= 50
     or (exists (select 1 from pg_roles r where r.rolname = p_owner)
         and pgfleet.has_role(p_owner, 'pgfleet_operator')) then
    return null;
  end if;
  select * into c from pgfleet.ceiling_for(p_owner, 'max_priority');
  if p_priority > c.value then
    return array['priority', format('priority %s is above %s for role %s (%s)', p_priority, c.value,
                                    left(p_owner, 100), c.source)];
  end if;
  return null;
end $$;
comment on function pgfleet.priority_problem(text, integer) is
  'Whether a job or template priority is above the owner''s ceiling (setting max_priority, or its pgfleet.role_limits row), as {field, message}; null when within, at 50 or below, or for owners that are operators or admins.';

-- The default TTL is defined here only (migration 0001 also wrote it into
-- pgfleet.settings, where operators change it).
create or replace function pgfleet.host_ttl() returns interval
language sql stable as $$
  select make_interval(secs => pgfleet.setting('host_ttl_seconds', '10')::double precision)
$$;
comment on function pgfleet.host_ttl() is
  'How long a host may go without a heartbeat before it is lost (settings.host_ttl_seconds, default 10 s). The default equals kDefaultHostTtlSeconds in core/model/constants.h.';

-- Rules ------------------------------------------------------------------------

create or replace function pgfleet.doubling_delay(p_step integer, p_cap_seconds integer) returns interval
language sql immutable as $$
  -- The exponent is capped before power() so that any step stays in range
  -- (2^30 s, 34 years, is past any cap).
  select make_interval(secs => least(p_cap_seconds, power(2, least(greatest(p_step, 0), 30))))
$$;
comment on function pgfleet.doubling_delay(integer, integer) is
  'Exponential backoff: 2^p_step seconds (1 s at step 0 or below), at most p_cap_seconds, for any step.';

create or replace function pgfleet.retry_backoff(p_failures integer) returns interval
language sql immutable as $$
  select pgfleet.doubling_delay(p_failures - 1, 300)
$$;
comment on function pgfleet.retry_backoff(integer) is
  'Delay before the next attempt after p_failures consecutive failures: 1 s doubling up to 5 min.';

create or replace function pgfleet.state_after_host_loss(p_desired_state text, p_host_losses integer)
returns text
language sql immutable as $$
  -- A host loss is not the job's fault: it does not count against max_attempts;
  -- but a job lost with pgfleet.host_loss_limit() hosts fails.
  select case when p_desired_state = 'stop' then 'cancelled'
              when p_host_losses >= pgfleet.host_loss_limit() then 'failed'
              else 'pending' end
$$;
comment on function pgfleet.state_after_host_loss(text, integer) is
  'The host-loss rule: the state of a job whose attempt was lost with its host, given its desired_state and its host_losses counting this loss. cancelled if it was being stopped, failed at pgfleet.host_loss_limit() losses, else pending (losses do not count against max_attempts).';

create or replace function pgfleet.host_loss_note(p_state text) returns text
language sql immutable as $$
  select case when p_state = 'failed'
              then '; lost ' || pgfleet.host_loss_limit() || ' times, giving up' else '' end
$$;
comment on function pgfleet.host_loss_note(text) is
  'What a job''s error and its lost event add when the host-loss rule (pgfleet.state_after_host_loss) ended it: ''; lost N times, giving up'' when it failed, else nothing.';

-- Size limits of a job spec (core/model/constants.h: kMaxCommandArgs, ...):
-- every job fits a dispatch, and no row is a denial of service.
create or replace function pgfleet.max_command_args() returns integer language sql immutable as 'select 1000';
create or replace function pgfleet.max_command_bytes() returns integer language sql immutable as 'select 131072';
create or replace function pgfleet.max_env_bytes() returns integer language sql immutable as 'select 65536';
create or replace function pgfleet.max_constraints_bytes() returns integer language sql immutable as 'select 16384';
create or replace function pgfleet.max_path_bytes() returns integer language sql immutable as 'select 4096';
create or replace function pgfleet.max_job_user_id() returns bigint language sql immutable as 'select 2147483647';
comment on function pgfleet.max_job_user_id() is 'The largest uid or gid a job''s run_as may name (kMaxJobUserId): a larger number would wrap to another id on the host.';
comment on function pgfleet.max_command_args() is 'Most arguments of a job''s command (core/model/constants.h kMaxCommandArgs).';
comment on function pgfleet.max_command_bytes() is 'Most bytes of a job''s command, all arguments together (kMaxCommandBytes).';
comment on function pgfleet.max_env_bytes() is 'Most bytes of a job''s env, names and values together (kMaxEnvBytes).';
comment on function pgfleet.max_constraints_bytes() is 'Most bytes of a job''s constraints, labels and values together (kMaxConstraintsBytes).';
comment on function pgfleet.max_path_bytes() is 'Most bytes of a job''s rootfs, and of its user (kMaxPathBytes).';

-- Bytes of a JSON object of strings' names and values together.
create or replace function pgfleet.map_bytes(p jsonb) returns bigint
language sql immutable as $$
  select coalesce(sum(octet_length(key) + octet_length(value)), 0) from jsonb_each_text(p)
$$;
comment on function pgfleet.map_bytes(jsonb) is
  'Bytes of a JSON object of strings, names and values together (how env and constraints are measured against their limits).';

-- What hostd would refuse in a spec beyond the columns' own CHECKs
-- (core/model/job_spec.cpp Validate, the same rules and messages): env names,
-- and the size limits. Null when fine, else {field, message}.
create or replace function pgfleet.spec_problem(p_command text[], p_env jsonb, p_constraints jsonb,
                                                p_rootfs text, p_run_as text)
returns text[]
language plpgsql immutable as $$
declare
  v_bad text;
  v_bytes bigint;
begin
  select key into v_bad from jsonb_object_keys(p_env) key where key = '' or key like '%=%' limit 1;
  if found then
    return array['env', format('env names must be non-empty and contain no ''='' (got "%s")', v_bad)];
  end if;
  if cardinality(p_command) > pgfleet.max_command_args() then
    return array['command', format('command must have at most %s arguments (got %s)',
                                   pgfleet.max_command_args(), cardinality(p_command))];
  end if;
  v_bytes := coalesce((select sum(octet_length(a)) from unnest(p_command) a), 0);
  if v_bytes > pgfleet.max_command_bytes() then
    return array['command', format('command must be at most %s bytes (got %s)', pgfleet.max_command_bytes(), v_bytes)];
  end if;
  v_bytes := pgfleet.map_bytes(p_env);
  if v_bytes > pgfleet.max_env_bytes() then
    return array['env', format('env must be at most %s bytes (got %s)', pgfleet.max_env_bytes(), v_bytes)];
  end if;
  v_bytes := pgfleet.map_bytes(p_constraints);
  if v_bytes > pgfleet.max_constraints_bytes() then
    return array['constraints', format('constraints must be at most %s bytes (got %s)',
                                       pgfleet.max_constraints_bytes(), v_bytes)];
  end if;
  if octet_length(p_rootfs) > pgfleet.max_path_bytes() then
    return array['rootfs', format('rootfs must be at most %s bytes (got %s)', pgfleet.max_path_bytes(), octet_length(p_rootfs))];
  end if;
  if octet_length(p_run_as) > pgfleet.max_path_bytes() then
    return array['run_as', format('user must be at most %s bytes (got %s)', pgfleet.max_path_bytes(), octet_length(p_run_as))];
  end if;
  if p_run_as <> '' and p_run_as !~ '^([A-Za-z_][A-Za-z0-9._-]{0,31}|[0-9]{1,10}(:[0-9]{1,10})?)$' then
    return array['run_as', format('user must be a name (a letter or _, then at most 31 of A-Z a-z 0-9 . _ -) or uid[:gid] in decimal (got "%s")', p_run_as)];
  end if;
  if p_run_as ~ '^[0-9]' and exists (select 1 from unnest(string_to_array(p_run_as, ':')) n
                                      where n::bigint > pgfleet.max_job_user_id()) then
    return array['run_as', format('user ids must be at most %s (got "%s")', pgfleet.max_job_user_id(), p_run_as)];
  end if;
  return null;
end $$;
comment on function pgfleet.spec_problem(text[], jsonb, jsonb, text, text) is
  'The first rule of hostd''s spec validation (env names, size limits) the given job fields break, as {field, message}; null when none. Checked at insert of jobs and of formation templates.';

create or replace function pgfleet.try_lock_formation(p_formation integer) returns boolean
language sql volatile as $$
  select pg_try_advisory_xact_lock(pgfleet.lock_class(), p_formation)
$$;
comment on function pgfleet.try_lock_formation(integer) is
  'Takes the formation''s transaction-scoped scheduling lock without waiting; false when another scheduler holds it.';
