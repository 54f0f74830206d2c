-- A scheduler's tick of a cron formation (docs/cron.md): the jobs of the due
-- times that have come, by its overlap and catch_up rules, then its next
-- due time. What must hold: one job per (formation, due time) however many
-- schedulers tick or restart (jobs_formation_due_at_key, on conflict do
-- nothing; the formation's row lock serializes ticks); next_due_at moves
-- past now, so a scheduler that was down makes at most catch_up jobs.

-- Security definer: a scheduler may not update formations, and the tick
-- writes only the formation's due times; execute is the schedulers' and
-- operators' alone.
create or replace function pgfleet.cron_tick(p_formation integer) returns integer
language plpgsql security definer set search_path = pgfleet, pg_temp as $$
declare
  f pgfleet.formations;
  v_now timestamptz := now();
  v_due timestamptz[];
  v_missed boolean;
  v_make timestamptz[];
  v_live bigint[];
  v_ids bigint[] := '{}';
  v_note text;
begin
  select * into f from pgfleet.formations x
   where x.id = p_formation and x.kind = 'cron' and x.deleted_at is null
     for update;
  if not found or f.next_due_at is null or f.next_due_at > v_now then
    return 0;
  end if;
  select r.due, r.missed into v_due, v_missed
    from pgfleet.cron_recent_times(f.cron, f.time_zone, f.next_due_at, v_now, f.catch_up) r;
  -- Runs that must not overlap: of several due times, only the latest runs.
  v_make := case when f.overlap = 'allow' or cardinality(v_due) = 0 then v_due
                 else array[v_due[cardinality(v_due)]] end;
  -- Its own earlier runs still live (a job another role put in the
  -- formation neither blocks nor is stopped).
  v_live := array(select j.id from pgfleet.jobs j
                   where j.formation = f.name and j.due_at is not null and j.owner = f.owner
                     and j.state in ('pending', 'assigned', 'running')
                   order by j.due_at);
  if cardinality(v_make) > 0 and cardinality(v_live) > 0 and f.overlap = 'skip' then
    insert into pgfleet.job_events (job_id, attempt, kind, detail)
    select j.id, j.attempt, 'cron_skipped',
           format('cron formation %s: the run due at %s was skipped: this run (due at %s) is still %s (overlap skip)',
                  f.name, v_make[1], j.due_at, j.state)
      from pgfleet.jobs j where j.id = v_live[cardinality(v_live)];
    v_make := '{}';
  elsif cardinality(v_make) > 0 and cardinality(v_live) > 0 and f.overlap = 'cancel_previous' then
    perform pgfleet.stop_jobs(v_live, format('cron formation %s: replaced by the run due at %s (overlap cancel_previous)',
                                             f.name, v_make[cardinality(v_make)]));
  end if;
  if cardinality(v_make) > 0 then
    execute format(
      'with made as (
         insert into pgfleet.jobs (formation, owner, privileged, max_attempts, version, due_at, %1$s)
         select f.name, f.owner, f.privileged, f.max_attempts, f.version, d, %2$s
           from pgfleet.formations f, unnest($2) d
          where f.id = $1
         on conflict (formation, due_at) where due_at is not null do nothing
         returning id, due_at)
       select coalesce(array_agg(id order by due_at), ''{}'') from made',
      (select string_agg(quote_ident(c), ', ') from unnest(pgfleet.template_columns()) c),
      (select string_agg('f.' || quote_ident(c), ', ') from unnest(pgfleet.template_columns()) c))
    into v_ids
    using p_formation, v_make;
  end if;
  if (v_missed or cardinality(v_make) < cardinality(v_due)) and cardinality(v_ids) > 0 then
    v_note := format('cron formation %s: due times from %s to %s were missed while no scheduler ticked; '
                     || 'catch_up %s, overlap %s: a job for the latest %s of them only',
                     f.name, f.next_due_at, v_due[cardinality(v_due)], f.catch_up, f.overlap,
                     cardinality(v_ids));
    insert into pgfleet.job_events (job_id, attempt, kind, detail)
    values (v_ids[1], 0, 'cron_missed', v_note);
  end if;
  update pgfleet.formations x
     set last_due_at = coalesce(v_due[cardinality(v_due)], x.last_due_at),
         next_due_at = pgfleet.cron_next(f.cron, f.time_zone, v_now)
   where x.id = p_formation;
  return cardinality(v_ids);
end $$;
comment on function pgfleet.cron_tick(integer) is
  'A scheduler''s tick of cron formation p_formation, under its lock: once next_due_at has come, a job from the template for each of the most recent catch_up due times (only the latest unless overlap is allow), one per due time (jobs.due_at), by the overlap rule (skip: none while an earlier run is live, an event on it says so; cancel_previous: stops the live runs first); then next_due_at moves past now. Returns how many jobs it made.';
revoke execute on function pgfleet.cron_tick(integer) from public;
grant execute on function pgfleet.cron_tick(integer) to pgfleet_scheduler, pgfleet_operator;
