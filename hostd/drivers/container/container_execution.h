#pragma once
// A running container job as its shim holds it (driver.h Execution): the
// container's init (container_child.h) is the process waited for; the job's
// own status comes from the init's status pipe.

#include <sys/types.h>

#include <memory>
#include <string>

#include "hostd/drivers/container/cgroup.h"
#include "hostd/drivers/container/container_disk.h"
#include "hostd/drivers/driver.h"

namespace pgfleet::hostd::container {

// init: the container's PID 1 (the caller's unreaped child); job: the job's
// process as the host sees it (pid() returns it); status_fd: the read end of
// the init's status pipe, owned from here on. SIGKILL goes to the whole
// cgroup, any other signal to the init, which forwards it to the job.
std::unique_ptr<Execution> MakeExecution(pid_t init, pid_t job, int status_fd,
                                         std::unique_ptr<JobCgroup> cgroup, int memory_mib,
                                         std::string ids, std::unique_ptr<JobDisk> disk);

}  // namespace pgfleet::hostd::container
