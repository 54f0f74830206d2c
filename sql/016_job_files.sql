-- Job files (pgfleet.spec_files, migration 0036, docs/files.md): the two
-- measures its byte rules use, and those rules.

create or replace function pgfleet.files_bytes(v jsonb) returns bigint
language sql immutable strict parallel safe as $$
  select case when jsonb_typeof(v) = 'object' then
    (select coalesce(sum(case when e.value -> 'base64' = 'true'::jsonb
                              then octet_length(e.value ->> 'content') / 4 * 3
                                   - length(substring(e.value ->> 'content' from '=*$'))
                              else octet_length(e.value ->> 'content') end), 0)
       from jsonb_each(v) e where jsonb_typeof(e.value) = 'object') end
$$;
comment on function pgfleet.files_bytes(jsonb) is
  'Bytes of the files of a job''s files (pgfleet.spec_files) as hostd writes them: text content''s bytes, base64 content''s decoded bytes, summed; null when v is not an object.';

create or replace function pgfleet.files_longest_path(v jsonb) returns integer
language sql immutable strict parallel safe as $$
  select case when jsonb_typeof(v) = 'object' then
    (select coalesce(max(octet_length(k)), 0) from jsonb_object_keys(v) k) end
$$;
comment on function pgfleet.files_longest_path(jsonb) is
  'Bytes of the longest path of a job''s files (pgfleet.spec_files); null when v is not an object.';

-- The rules of pgfleet.spec_files that measure bytes, added once (on a schema
-- from before migration 0036 there is no domain yet).
do $$
declare
  v_rule record;
begin
  if to_regtype('pgfleet.spec_files') is null then
    return;
  end if;
  for v_rule in select * from (values
      ('files must hold at most 1 MiB in all', 'pgfleet.files_bytes(value) <= 1048576'),
      ('files paths must be at most 255 bytes', 'pgfleet.files_longest_path(value) <= 255')) r (name, rule)
  loop
    if not exists (select 1 from pg_constraint where contypid = 'pgfleet.spec_files'::regtype
                      and conname = v_rule.name) then
      execute format('alter domain pgfleet.spec_files add constraint %I check (%s)',
                     v_rule.name, v_rule.rule);
    end if;
  end loop;
end $$;
