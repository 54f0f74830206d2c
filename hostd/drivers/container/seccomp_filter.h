#pragma once
// The default seccomp filter of unprivileged container jobs, modelled on
// Docker's default profile: everything is allowed but what lets a process
// reach past its container or the kernel's shared state. Refused with EPERM:
//
//   namespaces   unshare, setns, and clone with any CLONE_NEW* flag (no new
//                user namespace, where a job would be root again); clone3
//                fails with ENOSYS so that libc falls back to clone, whose
//                flags a filter can read
//   mounts       mount, umount2, pivot_root, open_by_handle_at, name_to_handle_at
//   the kernel   init_module, finit_module, delete_module, kexec_load,
//                kexec_file_load, reboot, swapon, swapoff, acct, quotactl,
//                bpf, perf_event_open, userfaultfd, lookup_dcookie, iopl,
//                ioperm, the io_uring calls
//   keys         keyctl, add_key, request_key (the kernel keyring is not
//                namespaced)
//   clocks       clock_settime, clock_adjtime, settimeofday, adjtimex
//   tracing      ptrace's PTRACE_ATTACH and PTRACE_SEIZE (a job may still
//                trace the children it starts with PTRACE_TRACEME),
//                process_vm_readv and process_vm_writev
//
// Privileged jobs run without it, as before.

#include <linux/filter.h>

#include <vector>

namespace pgfleet::hostd::container {

// The filter as BPF instructions, built once (before any clone: the child may
// only make plain system calls) and loaded by the child with seccomp(2)
// after no_new_privs. Throws DriverError when libseccomp cannot build it.
const std::vector<sock_filter>& DefaultSeccompProgram();

}  // namespace pgfleet::hostd::container
