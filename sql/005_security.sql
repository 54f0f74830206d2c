-- Security: the roles, who is calling, and the rules every path checks
-- (docs/security.md). Grants and row-level security policies: 090_security.sql.

-- The group roles (NOLOGIN; people and daemons get logins that are members).
-- Roles belong to the whole PostgreSQL cluster, so another database's
-- migrate may be creating the same one at this moment: that is not an error.
do $$
declare
  v_role text;
begin
  foreach v_role in array array['pgfleet_submitter', 'pgfleet_operator', 'pgfleet_reader',
                                'pgfleet_scheduler', 'pgfleet_host', 'pgfleet_privileged'] loop
    if not exists (select 1 from pg_roles where rolname = v_role) then
      begin
        execute format('create role %I nologin', v_role);
      exception when duplicate_object or unique_violation then
        null;
      end;
    end if;
  end loop;
  -- An operator may do what a submitter may, for every job.
  if not pg_has_role('pgfleet_operator', 'pgfleet_submitter', 'member') then
    begin
      grant pgfleet_submitter to pgfleet_operator;
    exception when duplicate_object or unique_violation or internal_error then
      null;  -- (internal_error: "tuple concurrently updated", the same grant racing)
    end;
  end if;
end $$;

-- The role on whose behalf this statement runs: the role set with SET ROLE,
-- else the login. Unlike current_user it stays the same inside SECURITY
-- DEFINER functions, which run as the schema's owner.
create or replace function pgfleet.caller() returns text
language sql stable as $$
  select coalesce(nullif(current_setting('role'), 'none'), session_user)::text
$$;
comment on function pgfleet.caller() is
  'The role on whose behalf this statement runs (SET ROLE, else the login), also inside SECURITY DEFINER functions.';

-- Superusers and the schema's owner (who runs migrate) may do everything.
-- The owner is written into pgfleet.schema_owner() by each migrate, as a
-- role oid (a renamed role stays the owner), so that is_admin is one call of
-- pg_has_role that the planner inlines (docs/decisions/0005). After ALTER
-- SCHEMA ... OWNER TO, run migrate again (the old owner keeps owning the
-- tables until then).
do $$
begin
  execute format('create or replace function pgfleet.schema_owner() returns oid '
                 'language sql immutable as %L',
                 format('select %s::oid', (select n.nspowner from pg_namespace n where n.nspname = 'pgfleet')));
end $$;
comment on function pgfleet.schema_owner() is
  'The role that owns the pgfleet schema (its oid), as of the last migrate.';

create or replace function pgfleet.is_admin(p_role text) returns boolean
language sql stable as $$
  select pg_has_role(p_role, pgfleet.schema_owner(), 'member')
$$;
comment on function pgfleet.is_admin(text) is
  'True for superusers and members of the role that owns the pgfleet schema (pgfleet.schema_owner).';

create or replace function pgfleet.has_role(p_role text, p_group text) returns boolean
language sql stable as $$
  select pgfleet.is_admin(p_role) or pg_has_role(p_role, p_group, 'member')
$$;
comment on function pgfleet.has_role(text, text) is
  'True when p_role is an admin (pgfleet.is_admin) or a member of the group role p_group.';

create or replace function pgfleet.caller_privileged() returns boolean
language sql stable as $$
  select pgfleet.has_role(pgfleet.caller(), 'pgfleet_privileged')
$$;
comment on function pgfleet.caller_privileged() is
  'True when the caller may ask for privileged job features (a member of pgfleet_privileged, or an admin). Default of jobs.privileged.';

create or replace function pgfleet.default_network() returns text
language sql stable as $$
  select case when pgfleet.caller_privileged() then 'host' else 'none' end
$$;
comment on function pgfleet.default_network() is
  'What jobs.network and formations.network default to: host for privileged callers, none (the job''s own empty network) for the others.';

-- The privileged job features, the same rules as hostd's
-- (core/model/job_spec.cpp PrivilegeProblem): null when none is asked for,
-- else {field, message}.
create or replace function pgfleet.privilege_problem(p_run_as text, p_network text, p_rootfs text,
                                                     p_seccomp text, p_ports jsonb)
returns text[]
language sql immutable as $$
  select case
    when p_run_as ~ '^(root|0+)(:.*)?$' then
      array['run_as', format('user %s runs the job as root: only members of pgfleet_privileged may ask for it', p_run_as)]
    when p_run_as ~ '^[0-9]+:0+$' then
      array['run_as', format('user %s runs the job in the root group: only members of pgfleet_privileged may ask for it', p_run_as)]
    when p_run_as ~ '^[0-9]+(:[0-9]+)?$' and exists (
           select 1 from unnest(string_to_array(p_run_as, ':')) i
            where i::numeric >= 65536) then
      array['run_as', format('user %s: ids of unprivileged jobs must be below 65536 (their user namespace has that many); only members of pgfleet_privileged may name host ids', p_run_as)]
    when p_seccomp = 'unconfined' then
      array['seccomp', 'seccomp unconfined runs the job without the default seccomp filter: only members of pgfleet_privileged may ask for it']
    when p_network = 'host' then
      array['network', 'network host shares the host''s network: only members of pgfleet_privileged may ask for it (others get network none)']
    when p_rootfs is not null and (p_rootfs !~ '^[A-Za-z0-9_-][A-Za-z0-9._-]*$') then
      array['rootfs', format('rootfs %s is a path: only members of pgfleet_privileged may give one; others name a root filesystem under hostd''s rootfs directory (A-Z a-z 0-9 . _ -, not starting with .)', p_rootfs)]
    when jsonb_typeof(p_ports) = 'object' and jsonb_path_exists(p_ports, '$.* ? (@ >= 1 && @ < 1024)') then
      (select array['ports', format('ports.%s asks for host port %s: ports below 1024 are for members of pgfleet_privileged only', e.key, e.value)]
         from jsonb_each(p_ports) e
        where jsonb_typeof(e.value) = 'number' and e.value::text::numeric between 1 and 1023
        order by e.key limit 1)
  end
$$;
comment on function pgfleet.privilege_problem(text, text, text, text, jsonb) is
  'Which privileged feature a job asks for (user root or host ids, seccomp unconfined, network host, a rootfs path, a host port below 1024), as {field, message}; null when none.';

create or replace function pgfleet.require_role(p_group text, p_what text) returns void
language plpgsql stable as $$
begin
  if not pgfleet.has_role(pgfleet.caller(), p_group) then
    raise exception '% needs membership in % (% is not a member)', p_what, p_group, pgfleet.caller()
      using errcode = 'insufficient_privilege';
  end if;
end $$;
comment on function pgfleet.require_role(text, text) is
  'Raises insufficient_privilege unless the caller is an admin or a member of p_group.';

-- A hostd may act only for the host ids its login is bound to.
create or replace function pgfleet.require_host(p_host text) returns void
language plpgsql stable as $$
declare
  v_caller text := pgfleet.caller();
begin
  if pgfleet.is_admin(v_caller) then
    return;
  end if;
  if not pg_has_role(v_caller, 'pgfleet_host', 'member') then
    raise exception 'acting for host % needs membership in pgfleet_host (% is not a member)', p_host, v_caller
      using errcode = 'insufficient_privilege';
  end if;
  if not exists (select 1 from pgfleet.host_logins l where l.login = v_caller and l.host_id = p_host) then
    raise exception 'login % may not act for host %: pgfleet.host_logins does not bind it to that host', v_caller, p_host
      using errcode = 'insufficient_privilege',
            hint = format('an operator runs: insert into pgfleet.host_logins (login, host_id) values (%L, %L)', v_caller, p_host);
  end if;
end $$;
comment on function pgfleet.require_host(text) is
  'Raises insufficient_privilege unless the caller is an admin or a pgfleet_host login bound to p_host in pgfleet.host_logins.';
