-- An operator's ceilings per role (issue 33): a row here is, for jobs owned
-- by that role, the value of one of the job-ceiling settings (max_pids,
-- max_stop_grace_seconds, max_disk_mib, max_log_mib) in place of the
-- cluster's (pgfleet.settings). Checked when written by the settings' own
-- rules (pgfleet.role_limits_check); read by pgfleet.limit_problem.
create table pgfleet.role_limits (
  role text not null,
  name text not null,
  value text not null,
  primary key (role, name)
);
comment on table pgfleet.role_limits is
  'Per-role job ceilings: for jobs owned by role, setting name (max_pids, max_stop_grace_seconds, max_disk_mib, max_log_mib) is value instead of pgfleet.settings''. Written by operators.';
comment on column pgfleet.role_limits.role is 'The role whose jobs (and formation templates) the ceiling applies to; it must exist.';
comment on column pgfleet.role_limits.name is 'A job ceiling: max_pids, max_stop_grace_seconds, max_disk_mib or max_log_mib (pgfleet.job_ceiling_names()).';
comment on column pgfleet.role_limits.value is 'Its value for that role, checked by the setting''s own rule (pgfleet.setting_rules()).';
