-- How much of a job's output its host keeps: at most log_max_files files of
-- log_max_file_mb MiB each, the oldest removed first (hostd/output/output_log.h).
-- Null takes the host's default (hostd --log-max-files, --log-max-file-mb).
-- Both are template columns of formations too. The bounds are the same as
-- hostd's (model::kMinLogMaxFiles, ...), and the messages name the column.

alter table pgfleet.jobs
  add column log_max_files integer
    constraint "log_max_files must be between 2 and 100" check (log_max_files between 2 and 100),
  add column log_max_file_mb integer
    constraint "log_max_file_mb must be between 1 and 1024"
      check (log_max_file_mb between 1 and 1024);
comment on column pgfleet.jobs.log_max_files is
  'Output files the host keeps for each attempt (the oldest is removed first); null = the host''s --log-max-files (default 5).';
comment on column pgfleet.jobs.log_max_file_mb is
  'MiB per output file before the host starts a new one; null = the host''s --log-max-file-mb (default 20).';

alter table pgfleet.formations
  add column log_max_files integer
    constraint "log_max_files must be between 2 and 100" check (log_max_files between 2 and 100),
  add column log_max_file_mb integer
    constraint "log_max_file_mb must be between 1 and 1024"
      check (log_max_file_mb between 1 and 1024);
comment on column pgfleet.formations.log_max_files is
  'Job template: output files kept per replica attempt; null = the host''s default.';
comment on column pgfleet.formations.log_max_file_mb is
  'Job template: MiB per output file; null = the host''s default.';
