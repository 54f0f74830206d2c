-- Host tickets (core/net/ticket.h): what lets a caller start, stop or read
-- one attempt on one host, signed with that host's key. The scheduler signs
-- dispatch and stop tickets itself; log tickets are signed here, after the
-- caller is found to be allowed to read the job's output.

-- HMAC-SHA256 (RFC 2104) with the built-in sha256, so no extension is needed.
create or replace function pgfleet.hmac_sha256(p_key bytea, p_message text) returns text
language plpgsql immutable strict as $$
declare
  k bytea := p_key;
  ipad bytea;
  opad bytea;
begin
  if length(k) > 64 then
    k := sha256(k);
  end if;
  k := k || decode(repeat('00', 64 - length(k)), 'hex');
  ipad := k;
  opad := k;
  for i in 0..63 loop
    ipad := set_byte(ipad, i, get_byte(k, i) # 54);  -- 0x36
    opad := set_byte(opad, i, get_byte(k, i) # 92);  -- 0x5c
  end loop;
  return encode(sha256(opad || sha256(ipad || convert_to(p_message, 'UTF8'))), 'hex');
end $$;
comment on function pgfleet.hmac_sha256(bytea, text) is
  'HMAC-SHA256 of p_message under p_key, as hex (what hostd checks tickets with).';

create or replace function pgfleet.set_host_key(p_host text, p_key text) returns void
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
begin
  perform pgfleet.require_host(p_host);
  if p_key is null or p_key !~ '^[0-9a-f]{64}$' then
    raise exception 'key: a host''s ticket key must be 64 lowercase hex digits'
      using errcode = 'invalid_parameter_value';
  end if;
  insert into pgfleet.host_keys as k (host_id, key) values (p_host, decode(p_key, 'hex'))
  on conflict (host_id) do update set key = excluded.key, set_at = now()
   where k.key <> excluded.key;
end $$;
comment on function pgfleet.set_host_key(text, text) is
  'Host: registers the key (64 hex digits) its tickets are signed with; hostd calls it with register_host.';

-- A ticket to look into one attempt on the host that ran it: read its
-- output (logs), read its sandbox's files (fs), or run a command in it
-- (exec: only the running attempt). Only the job's owner and operators (and
-- admins) get one.
create or replace function pgfleet.host_ticket(p_job bigint, p_kind text, p_attempt integer default null)
returns table (host_id text, api_url text, attempt integer, ticket text)
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  v_owner text;
  v_current integer;
  v_state text;
  v_host text;
  v_attempt integer;
  v_url text;
  v_key bytea;
  v_payload text;
begin
  if p_kind is null or p_kind not in ('logs', 'fs', 'exec') then
    raise exception 'kind: a host ticket is for logs, fs or exec (got %)', coalesce(p_kind, 'null')
      using errcode = 'invalid_parameter_value';
  end if;
  select j.owner, j.attempt, j.host_id, j.state into v_owner, v_current, v_host, v_state
    from pgfleet.jobs j where j.id = p_job;
  if not found or not (v_owner = pgfleet.caller() or pgfleet.has_role(pgfleet.caller(), 'pgfleet_operator')) then
    raise exception 'job %: no such job, or % may not % (only its owner and operators may)',
      p_job, pgfleet.caller(),
      case p_kind when 'logs' then 'read its output' when 'fs' then 'read its files'
                  else 'run commands in it' end
      using errcode = 'insufficient_privilege';
  end if;
  if v_current = 0 then
    raise exception 'job % has not run yet (state %): there is nothing on a host to look into', p_job, v_state
      using errcode = 'invalid_parameter_value';
  end if;
  v_attempt := coalesce(p_attempt, v_current);
  if v_attempt < 1 or v_attempt > v_current then
    raise exception 'attempt: job % has no attempt % (its attempts: 1 to %)', p_job, v_attempt, v_current
      using errcode = 'invalid_parameter_value';
  end if;
  if p_kind = 'exec' and (v_state <> 'running' or v_attempt <> v_current) then
    raise exception 'job % attempt % is not running (state %): exec runs commands in a running job only',
      p_job, v_attempt, v_state using errcode = 'invalid_parameter_value';
  end if;
  if v_attempt < v_current then  -- an earlier attempt: the host its events name
    select e.host_id into v_host from pgfleet.job_events e
     where e.job_id = p_job and e.attempt = v_attempt and e.kind = 'assigned'
       and e.host_id is not null
     order by e.id limit 1;
  end if;
  if v_host is null then
    raise exception 'job % attempt %: no record of the host it ran on', p_job, v_attempt
      using errcode = 'no_data_found';
  end if;
  select h.api_url, k.key into v_url, v_key
    from pgfleet.hosts h left join pgfleet.host_keys k on k.host_id = h.id
   where h.id = v_host;
  if v_key is null then
    raise exception 'host % has no ticket key (no longer registered, or its hostd predates tickets)', v_host
      using errcode = 'no_data_found';
  end if;
  v_payload := format('v1:%s:%s:%s:%s:0:%s:%s', p_kind, v_host, p_job, v_attempt,
                      extract(epoch from now())::bigint + 60,
                      substr(md5(random()::text || clock_timestamp()::text || p_job::text), 1, 16));
  return query select v_host, v_url, v_attempt, v_payload || ':' || pgfleet.hmac_sha256(v_key, v_payload);
end $$;
comment on function pgfleet.host_ticket(bigint, text, integer) is
  'A ticket (valid 60 s, taken once) of kind logs (read the output), fs (read the sandbox''s files) or exec (run a command in the running attempt) for attempt p_attempt (default: the latest) of job p_job, with the API URL of the host that ran it. Only the job''s owner and operators get one.';

-- A ticket to read one attempt's output (host_ticket of kind logs).
create or replace function pgfleet.log_ticket(p_job bigint, p_attempt integer default null)
returns table (host_id text, api_url text, attempt integer, ticket text)
language sql security definer set search_path = pgfleet, pg_temp as $$
  select * from pgfleet.host_ticket(p_job, 'logs', p_attempt)
$$;
comment on function pgfleet.log_ticket(bigint, integer) is
  'A ticket (valid 60 s, taken once) to read attempt p_attempt (default: the latest) of job p_job from the host that ran it, with that host''s API URL. Only the job''s owner and operators get one.';
