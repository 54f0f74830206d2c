-- Cron formations (migration 0034; docs/cron.md): reading a cron expression
-- (pgfleet.cron_field, cron_fields, cron_problem), its due times in an IANA
-- time zone (cron_times, cron_next), and a scheduler's tick of a formation
-- (cron_tick), which makes the jobs of the due times that have come.
-- What must hold: due times are walked in wall-clock time of the zone, then
-- turned into instants by pgfleet.cron_instant (a wall time a daylight-saving
-- jump skips runs at the first minute after the jump; one that repeats, at
-- its first occurrence); a due time makes at most one job
-- (jobs_formation_due_at_key). PL/pgSQL throughout: migrate_test applies
-- this file to schemas older than migration 0034.

-- The values one field allows, ascending. Raises invalid_parameter_value
-- naming the field and the rule.
create or replace function pgfleet.cron_field(p_text text, p_name text, p_lo integer, p_hi integer)
returns integer[]
language plpgsql immutable as $$
declare
  v_names text[] := case p_name
    when 'month' then array['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct',
                            'nov', 'dec']
    when 'day of week' then array['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] end;
  v_first integer := case p_name when 'month' then 1 else 0 end;
  v_text text := lower(p_text);
  v_item text;
  v_m text[];
  v_from integer;
  v_to integer;
  v_step integer;
  v_out integer[] := '{}';
begin
  for i in 1 .. coalesce(cardinality(v_names), 0) loop
    v_text := regexp_replace(v_text, '\m' || v_names[i] || '\M', (i - 1 + v_first)::text, 'g');
  end loop;
  foreach v_item in array string_to_array(v_text, ',') loop
    v_m := regexp_match(v_item, '^(\*|([0-9]{1,4})(-([0-9]{1,4}))?)(/([0-9]{1,4}))?$');
    if v_m is null then
      raise exception 'cron % must be *, a value, a range a-b, a step */n or a-b/n, or a list of them (got "%")',
        p_name, left(p_text, 100) using errcode = 'invalid_parameter_value', column = 'cron';
    end if;
    v_step := coalesce(v_m[6]::integer, 1);
    if v_m[1] = '*' then
      v_from := p_lo;
      v_to := p_hi;
    else
      v_from := v_m[2]::integer;
      v_to := coalesce(v_m[4]::integer, case when v_m[6] is null then v_from else p_hi end);
    end if;
    if v_from < p_lo or v_from > p_hi or v_to < p_lo or v_to > p_hi then
      raise exception 'cron % values must be % to % (got "%")', p_name, p_lo, p_hi, v_item
        using errcode = 'invalid_parameter_value', column = 'cron';
    end if;
    if v_from > v_to then
      raise exception 'cron % range must not go down (got "%")', p_name, v_item
        using errcode = 'invalid_parameter_value', column = 'cron';
    end if;
    if v_step < 1 then
      raise exception 'cron % step must be >= 1 (got "%")', p_name, v_item
        using errcode = 'invalid_parameter_value', column = 'cron';
    end if;
    v_out := v_out || array(select generate_series(v_from, v_to, v_step));
  end loop;
  -- 7 is Sunday as well as 0.
  return array(select distinct case when p_name = 'day of week' and x = 7 then 0 else x end
                 from unnest(v_out) x order by 1);
end $$;
comment on function pgfleet.cron_field(text, text, integer, integer) is
  'The values one cron field allows (*, values, ranges a-b, steps */n a-b/n n/n, comma lists; month and day-of-week names; day-of-week 7 is 0, Sunday), ascending; raises invalid_parameter_value naming the field and the rule.';

-- The fields of an expression, macros expanded: 5, or 6 with leading seconds.
create or replace function pgfleet.cron_fields(p_expr text) returns text[]
language plpgsql immutable as $$
declare
  v_expr text := btrim(coalesce(p_expr, ''));
  v_f text[];
begin
  if length(v_expr) > 200 then
    raise exception 'cron must be at most 200 characters (got %)', length(v_expr)
      using errcode = 'invalid_parameter_value', column = 'cron';
  end if;
  v_expr := case lower(v_expr)
    when '@yearly' then '0 0 1 1 *' when '@annually' then '0 0 1 1 *'
    when '@monthly' then '0 0 1 * *' when '@weekly' then '0 0 * * 0'
    when '@daily' then '0 0 * * *' when '@midnight' then '0 0 * * *'
    when '@hourly' then '0 * * * *' else v_expr end;
  v_f := regexp_split_to_array(v_expr, '\s+');
  if v_expr = '' or cardinality(v_f) not in (5, 6) then
    raise exception 'cron must have 5 fields: minute hour day-of-month month day-of-week, or be @hourly, @daily, @weekly, @monthly or @yearly (got "%")',
      left(p_expr, 100) using errcode = 'invalid_parameter_value', column = 'cron';
  end if;
  return v_f;
end $$;
comment on function pgfleet.cron_fields(text) is
  'A cron expression''s fields (macros such as @daily expanded): 5, or 6 when it leads with seconds; raises invalid_parameter_value naming the rule otherwise.';

-- Why p_expr cannot be a formation's cron, naming the field and the rule;
-- null when it can.
create or replace function pgfleet.cron_problem(p_expr text) returns text
language plpgsql stable as $$
declare
  v_f text[];
  o integer;
  v_dom integer[];
  v_mon integer[];
begin
  if p_expr is null then
    return 'cron must be given for a cron formation, e.g. ''0 3 * * *''';
  end if;
  v_f := pgfleet.cron_fields(p_expr);
  o := cardinality(v_f) - 5;
  if o = 1 then
    if pgfleet.setting_number('cron_seconds_field') <> 1 then
      return format('cron must have 5 fields: a 6th (seconds) field needs the operator setting cron_seconds_field = 1, meant for tests (got "%s")',
                    left(p_expr, 100));
    end if;
    perform pgfleet.cron_field(v_f[1], 'second', 0, 59);
  end if;
  perform pgfleet.cron_field(v_f[1 + o], 'minute', 0, 59);
  perform pgfleet.cron_field(v_f[2 + o], 'hour', 0, 23);
  v_dom := pgfleet.cron_field(v_f[3 + o], 'day of month', 1, 31);
  v_mon := pgfleet.cron_field(v_f[4 + o], 'month', 1, 12);
  perform pgfleet.cron_field(v_f[5 + o], 'day of week', 0, 7);
  -- A day of the month that no month of it has (30 2), with no day of week
  -- to run on instead, would never run.
  if left(v_f[5 + o], 1) = '*' and not exists (
       select 1 from unnest(v_mon) m, unnest(v_dom) d
        where d <= case when m = 2 then 29 when m in (4, 6, 9, 11) then 30 else 31 end) then
    return format('cron day of month never comes in its months (got "%s %s")', v_f[3 + o], v_f[4 + o]);
  end if;
  return null;
exception when invalid_parameter_value then
  return sqlerrm;
end $$;
comment on function pgfleet.cron_problem(text) is
  'Why a text cannot be a cron formation''s expression (field count, a field''s syntax or range, a 6th seconds field without the setting cron_seconds_field, a day of month its months never have), naming the field and the rule; null when it can.';

-- Why p_zone cannot be a cron formation's time zone; null when it can.
create or replace function pgfleet.cron_zone_problem(p_zone text) returns text
language plpgsql stable as $$
begin
  if p_zone is null then
    return 'time_zone must be given for a cron formation, e.g. Europe/Paris or UTC';
  end if;
  if length(p_zone) > 100 or not exists (select 1 from pg_timezone_names z where z.name = p_zone) then
    return format('time_zone must be an IANA time zone name (pg_timezone_names), e.g. Europe/Paris or UTC (got "%s")',
                  left(p_zone, 100));
  end if;
  return null;
end $$;
comment on function pgfleet.cron_zone_problem(text) is
  'Why a text cannot be a cron formation''s time_zone (not a name of pg_timezone_names: abbreviations and POSIX offsets are refused), naming the rule; null when it can.';

-- The instant wall time p_wall of zone p_zone names: a wall time a
-- daylight-saving jump skips is the first wall time after the jump (the
-- jump's instant); one that repeats is its first occurrence.
create or replace function pgfleet.cron_instant(p_wall timestamp, p_zone text) returns timestamptz
language plpgsql stable as $$
declare
  v_t timestamptz := p_wall at time zone p_zone;
  v_wall timestamp := date_trunc('minute', p_wall);
  v_d interval;
begin
  if (v_t at time zone p_zone) <> p_wall then
    -- Skipped: the first whole minute that exists (a jump is whole minutes).
    loop
      v_wall := v_wall + interval '1 minute';
      v_t := v_wall at time zone p_zone;
      exit when (v_t at time zone p_zone) = v_wall;
    end loop;
    return v_t;
  end if;
  -- PostgreSQL reads a repeated wall time as its later occurrence.
  foreach v_d in array array[interval '3 hours', interval '2 hours', interval '1 hour',
                             interval '30 minutes'] loop
    if ((v_t - v_d) at time zone p_zone) = p_wall then
      return v_t - v_d;
    end if;
  end loop;
  return v_t;
end $$;
comment on function pgfleet.cron_instant(timestamp, text) is
  'The instant a wall time of a time zone names, for cron: a wall time a daylight-saving jump skips is the instant of the jump (the first valid minute after it); a repeated wall time is its first occurrence.';

-- The due times of p_expr in p_zone after p_after up to p_until, at most
-- p_limit of them, ascending.
create or replace function pgfleet.cron_times(p_expr text, p_zone text, p_after timestamptz,
                                              p_until timestamptz, p_limit integer)
returns timestamptz[]
language plpgsql stable as $$
declare
  v_f text[] := pgfleet.cron_fields(p_expr);
  o integer := cardinality(v_f) - 5;
  v_unit interval := case when o = 1 then interval '1 second' else interval '1 minute' end;
  v_sec integer[] := case when o = 1 then pgfleet.cron_field(v_f[1], 'second', 0, 59) else '{0}' end;
  v_min integer[] := pgfleet.cron_field(v_f[1 + o], 'minute', 0, 59);
  v_hour integer[] := pgfleet.cron_field(v_f[2 + o], 'hour', 0, 23);
  v_dom integer[] := pgfleet.cron_field(v_f[3 + o], 'day of month', 1, 31);
  v_mon integer[] := pgfleet.cron_field(v_f[4 + o], 'month', 1, 12);
  v_dow integer[] := pgfleet.cron_field(v_f[5 + o], 'day of week', 0, 7);
  -- Both day fields restricted: either may match (Vixie cron); else both.
  v_either boolean := left(v_f[3 + o], 1) <> '*' and left(v_f[5 + o], 1) <> '*';
  v_wall timestamp;
  v_end timestamp;
  v_day_ok boolean;
  v_t timestamptz;
  v_out timestamptz[] := '{}';
begin
  if p_until is null or p_until <= p_after or p_limit < 1 then
    return v_out;
  end if;
  v_wall := date_trunc(case when o = 1 then 'second' else 'minute' end, p_after at time zone p_zone)
            + v_unit;
  -- A wall-clock bound a day past p_until's (offsets are under a day);
  -- 'infinity' ends at a leap day's eight-year worst case.
  v_end := least((p_until at time zone p_zone) + interval '1 day', v_wall + interval '9 years');
  while v_wall <= v_end loop
    if not extract(month from v_wall)::integer = any(v_mon) then
      v_wall := date_trunc('month', v_wall) + interval '1 month';
      continue;
    end if;
    v_day_ok := case when v_either
                     then extract(day from v_wall)::integer = any(v_dom)
                          or extract(dow from v_wall)::integer = any(v_dow)
                     else extract(day from v_wall)::integer = any(v_dom)
                          and extract(dow from v_wall)::integer = any(v_dow) end;
    if not v_day_ok then
      v_wall := date_trunc('day', v_wall) + interval '1 day';
      continue;
    end if;
    if not extract(hour from v_wall)::integer = any(v_hour) then
      v_wall := date_trunc('hour', v_wall) + interval '1 hour';
      continue;
    end if;
    if not extract(minute from v_wall)::integer = any(v_min) then
      v_wall := date_trunc('minute', v_wall) + interval '1 minute';
      continue;
    end if;
    if not floor(extract(second from v_wall))::integer = any(v_sec) then
      v_wall := v_wall + interval '1 second';
      continue;
    end if;
    v_t := pgfleet.cron_instant(v_wall, p_zone);
    exit when v_t > p_until;
    -- Skipped wall times share the jump's instant; a repeated one's first
    -- occurrence may lie before p_after: each instant once, after p_after.
    if v_t > p_after and (cardinality(v_out) = 0 or v_t > v_out[cardinality(v_out)]) then
      v_out := v_out || v_t;
      exit when cardinality(v_out) >= p_limit;
    end if;
    v_wall := v_wall + v_unit;
  end loop;
  return v_out;
end $$;
comment on function pgfleet.cron_times(text, text, timestamptz, timestamptz, integer) is
  'The due times of a cron expression in an IANA time zone after p_after, up to p_until, at most p_limit, ascending (wall times walked in the zone; daylight-saving gaps and repeats as pgfleet.cron_instant says).';

create or replace function pgfleet.cron_next(p_expr text, p_zone text, p_after timestamptz)
returns timestamptz
language plpgsql stable as $$
begin
  return (pgfleet.cron_times(p_expr, p_zone, p_after, 'infinity', 1))[1];
end $$;
comment on function pgfleet.cron_next(text, text, timestamptz) is
  'The first due time of a cron expression in an IANA time zone after p_after (null: none within 9 years). A wall time a daylight-saving jump skips runs once at the first minute after the jump; a repeated wall time runs once, at its first occurrence.';

-- The most recent p_keep due times in [p_from, p_until], looking back at
-- most 7 days, without walking 7 days of a frequent expression: the window
-- widens (1 hour, 1 day, 7 days) only while it holds fewer than p_keep.
-- missed: whether due times from p_from on were left out.
create or replace function pgfleet.cron_recent_times(p_expr text, p_zone text, p_from timestamptz,
                                                     p_until timestamptz, p_keep integer,
                                                     out due timestamptz[], out missed boolean)
language plpgsql stable as $$
declare
  v_window interval;
  v_lo timestamptz;
begin
  foreach v_window in array array[interval '1 hour', interval '1 day', interval '7 days'] loop
    v_lo := greatest(p_from, p_until - v_window);
    due := pgfleet.cron_times(p_expr, p_zone, v_lo - interval '1 microsecond', p_until, 100000);
    exit when cardinality(due) >= p_keep or v_lo = p_from;
  end loop;
  missed := v_lo > p_from or cardinality(due) > p_keep;
  due := due[greatest(cardinality(due) - p_keep + 1, 1):];
end $$;
comment on function pgfleet.cron_recent_times(text, text, timestamptz, timestamptz, integer) is
  'The most recent p_keep due times of a cron expression in [p_from, p_until], at most 7 days back, and whether earlier ones from p_from on were left out: what a cron formation''s tick catches up.';

-- BEFORE INSERT OR UPDATE of a cron formation: cron and time_zone must be
-- valid; next_due_at is computed when they change or the formation is
-- (re)created.
create or replace function pgfleet.formations_check_cron() returns trigger
language plpgsql as $$
declare
  v_problem text := coalesce(pgfleet.cron_problem(new.cron), pgfleet.cron_zone_problem(new.time_zone));
begin
  if v_problem is not null then
    raise exception '%', v_problem
      using errcode = 'check_violation',
            column = case when v_problem like 'time_zone%' then 'time_zone' else 'cron' end,
            detail = format('formation %s', new.name);
  end if;
  if tg_op = 'INSERT' or old.kind <> 'cron' or old.cron <> new.cron
     or old.time_zone <> new.time_zone or (old.deleted_at is not null and new.deleted_at is null) then
    new.next_due_at := pgfleet.cron_next(new.cron, new.time_zone, now());
    new.last_due_at := null;
  end if;
  return new;
end $$;
comment on function pgfleet.formations_check_cron() is
  'BEFORE INSERT OR UPDATE of a cron formation: refuses a bad cron (pgfleet.cron_problem) or time_zone (pgfleet.cron_zone_problem) naming the field; sets next_due_at when cron or time_zone change or the formation is (re)created, so no missed due time of an earlier schedule is caught up.';

drop trigger if exists formations_check_cron on pgfleet.formations;
create trigger formations_check_cron
  before insert or update of kind, cron, time_zone, deleted_at on pgfleet.formations
  for each row when (new.kind = 'cron')
  execute function pgfleet.formations_check_cron();
