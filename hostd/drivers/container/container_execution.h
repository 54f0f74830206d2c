#pragma once
// A running container job as its shim holds it (driver.h Execution): the
// container's init (container_child.h) is the process waited for; the job's
// own status comes from the init's status pipe.

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "hostd/drivers/container/cgroup.h"
#include "hostd/drivers/container/container_disk.h"
#include "hostd/drivers/driver.h"
#include "hostd/network/attachment.h"

namespace pgfleet::hostd::container {

// init: the container's PID 1 (the caller's unreaped child); job: the job's
// process as the host sees it (pid() returns it); status_fd: the read end of
// the init's status pipe, owned from here on. SIGKILL goes to the whole
// cgroup, any other signal to the init, which forwards it to the job.
// net: the job's network attachment (network "bridge"), detached (DEL) by
// Wait() once the job is gone; its record is in attempt_dir.
std::unique_ptr<Execution> MakeExecution(pid_t init, pid_t job, int status_fd,
                                         std::unique_ptr<JobCgroup> cgroup, int memory_mib,
                                         std::string ids, std::unique_ptr<JobDisk> disk,
                                         std::optional<network::Attachment> net,
                                         std::string attempt_dir);

}  // namespace pgfleet::hostd::container
