-- Job files (issue 38): small files a job or a formation's template carries,
-- written by hostd into the job's work dir before it starts (docs/files.md).
-- {"run.sh": {"content": "...", "mode": "0755"}, "conf/app.ini": {"content": "..."},
--  "logo.png": {"content": "<base64>", "base64": true}}
-- The rules, each a named CHECK of the domain (docs/decisions/0007), the same
-- as core/model/job_files.h (hostd checks them again); a NUL cannot be in a
-- jsonb string. The two rules that measure bytes (1 MiB in all, paths of at
-- most 255 bytes) call functions, so sql/016_job_files.sql, which defines
-- them, adds them to the domain.
create domain pgfleet.spec_files as jsonb
  constraint "files must be an object of at most 64 files"
    check (jsonb_typeof(value) = 'object'
           and jsonb_array_length(jsonb_path_query_array(value, '$.keyvalue()')) <= 64
           and not jsonb_path_exists(value, '$.* ? (@.type() != "object")'))
  constraint "files paths must be relative, no empty, . or .. components"
    check (not jsonb_path_exists(value,
             '$.keyvalue() ? (@.key == "" || @.key like_regex "^/|//|/$|(^|/)\\.\\.?(/|$)")'))
  constraint "files paths must not hold control characters"
    check (not jsonb_path_exists(value, '$.keyvalue() ? (@.key like_regex "[\\x01-\\x1f\\x7f]")'))
  constraint "files.*.content must be a string"
    check (not jsonb_path_exists(value, '$.* ? (!exists(@.content) || @.content.type() != "string")'))
  constraint "files.*.content must be text, or base64 with base64: true"
    check (not jsonb_path_exists(value,
             '$.* ? (@.base64 == true && !(@.content like_regex "^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"))')
           and not jsonb_path_exists(value,
             '$.* ? (!(@.base64 == true) && @.content like_regex "[\\x01-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]")'))
  constraint "files.*.mode must be octal 000-777 (no setuid, setgid, sticky)"
    check (not jsonb_path_exists(value,
             '$.* ? (exists(@.mode) && !(@.mode.type() == "string" && @.mode like_regex "^0?[0-7]{3}$"))'))
  constraint "files.*.base64 must be true or false"
    check (not jsonb_path_exists(value, '$.* ? (exists(@.base64) && @.base64.type() != "boolean")'))
  constraint "files.* may hold only content, mode and base64"
    check (not jsonb_path_exists(value,
             '$.*.keyvalue() ? (@.key != "content" && @.key != "mode" && @.key != "base64")'));
comment on domain pgfleet.spec_files is
  'Job files: {path: {"content": text, "mode": "0644", "base64": false}}, at most 64 files and 1 MiB of content in all, relative paths (docs/files.md).';

-- Big, and read only by the assignment (pgfleet.job_spec_json): the claim
-- never reads it (docs/decisions/0014), and a set above ~2 kB is TOASTed.
alter table pgfleet.jobs add column files pgfleet.spec_files;
alter table pgfleet.formations add column files pgfleet.spec_files;
comment on column pgfleet.jobs.files is
  'Files hostd writes into the job''s work dir before it starts (pgfleet.spec_files, docs/files.md): {path: {"content", "mode", "base64"}}, owned by the job''s user; null = none.';
comment on column pgfleet.formations.files is
  'Job template: the replicas'' files (pgfleet.jobs.files).';

-- Versions recorded before files say they had none (a revert to one then
-- takes the files away, as it takes back every other template column).
update pgfleet.formation_versions set template = template || '{"files": null}'
 where not template ? 'files';
