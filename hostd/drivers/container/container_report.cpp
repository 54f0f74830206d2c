#include "hostd/drivers/container/container_report.h"

#include <sys/socket.h>
#include <unistd.h>

namespace pgfleet::hostd::container {

void ChildFail(const ChildPlan& p, Step step, int err) {
  ChildReport r{step, err};
  ssize_t ignored = send(p.sync_fd, &r, sizeof r, MSG_NOSIGNAL);
  (void)ignored;
  _exit(127);
}

}  // namespace pgfleet::hostd::container
