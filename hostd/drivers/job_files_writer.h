#pragma once
// Writes a job's files (spec.files, docs/files.md) into its work dir before
// it starts, as root, into a directory the job (or whoever made it) may
// control: never follows a link. Each component is opened with openat from
// the work dir's descriptor (O_NOFOLLOW | O_DIRECTORY), each directory made
// with mkdirat, each file created with O_CREAT | O_EXCL | O_NOFOLLOW; a
// component that exists as a link or a non-directory, or a file that
// exists, fails the attempt. The paths are checked again here with the
// database's rules (model::ValidateJobFiles): nothing is taken on trust.
// Files and the directories made for them belong to uid:gid (the job's
// host ids); files get their mode, directories 0755.

#include <sys/types.h>

#include "core/model/job_files.h"

namespace pgfleet::hostd {

// work_dir_fd: a descriptor of the work dir (O_PATH is enough). Throws
// DriverError naming the file and what went wrong; what was written before
// stays (the attempt fails and its work dir is the job's anyway).
void WriteJobFiles(int work_dir_fd, const model::JobFiles& files, uid_t uid, gid_t gid);

}  // namespace pgfleet::hostd
