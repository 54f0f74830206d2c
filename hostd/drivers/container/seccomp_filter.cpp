#include "hostd/drivers/container/seccomp_filter.h"

#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "hostd/drivers/driver.h"

namespace pgfleet::hostd::container {
namespace {

constexpr const char* kRefused[] = {
    "unshare", "setns", "mount", "umount2", "pivot_root", "open_by_handle_at",
    "name_to_handle_at", "init_module", "finit_module", "delete_module", "kexec_load",
    "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "quotactl", "bpf",
    "perf_event_open", "userfaultfd", "lookup_dcookie", "iopl", "ioperm", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key", "clock_settime",
    "clock_adjtime", "settimeofday", "adjtimex", "process_vm_readv", "process_vm_writev",
};

constexpr unsigned long kNamespaceFlags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,
                                             CLONE_NEWNET,  CLONE_NEWUTS, CLONE_NEWIPC,
                                             CLONE_NEWCGROUP};

struct Ctx {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  ~Ctx() {
    if (ctx) seccomp_release(ctx);
  }
};

void Check(int rc, const std::string& what) {
  if (rc < 0) throw DriverError("seccomp filter: " + what + ": " + std::strerror(-rc));
}

std::vector<sock_filter> Build() {
  Ctx c;
  if (!c.ctx) throw DriverError("seccomp filter: seccomp_init failed");
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  for (const char* name : kRefused) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not a call of this architecture
    Check(seccomp_rule_add(c.ctx, eperm, nr, 0), name);
  }
  for (unsigned long flag : kNamespaceFlags) {
    Check(seccomp_rule_add(c.ctx, eperm, SCMP_SYS(clone), 1,
                           SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag)),
          "clone");
  }
  int clone3 = seccomp_syscall_resolve_name("clone3");
  if (clone3 != __NR_SCMP_ERROR) Check(seccomp_rule_add(c.ctx, SCMP_ACT_ERRNO(ENOSYS), clone3, 0), "clone3");
  for (long request : {PTRACE_ATTACH, PTRACE_SEIZE}) {
    Check(seccomp_rule_add(c.ctx, eperm, SCMP_SYS(ptrace), 1,
                           SCMP_A0(SCMP_CMP_EQ, static_cast<scmp_datum_t>(request))),
          "ptrace");
  }
  // Exported through a memfd: libseccomp 2.5 writes the program to a descriptor.
  int fd = memfd_create("pgfleet-seccomp", MFD_CLOEXEC);
  if (fd < 0) throw DriverError(std::string("seccomp filter: memfd_create: ") + std::strerror(errno));
  std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* f) { close(*f); });
  Check(seccomp_export_bpf(c.ctx, fd), "export");
  off_t size = lseek(fd, 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0) {
    throw DriverError("seccomp filter: exported program has a bad size");
  }
  std::vector<sock_filter> program(static_cast<size_t>(size) / sizeof(sock_filter));
  if (pread(fd, program.data(), static_cast<size_t>(size), 0) != size) {
    throw DriverError(std::string("seccomp filter: reading the program: ") + std::strerror(errno));
  }
  return program;
}

}  // namespace

const std::vector<sock_filter>& DefaultSeccompProgram() {
  static const std::vector<sock_filter> program = Build();
  return program;
}

}  // namespace pgfleet::hostd::container
