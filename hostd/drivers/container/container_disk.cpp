#include "hostd/drivers/container/container_disk.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "hostd/drivers/driver.h"

extern char** environ;

namespace pgfleet::hostd::container {
namespace {

std::string Errno(int err) { return std::strerror(err); }

// Runs argv (searched in the system's sbin directories) and waits; "" when it
// exited 0, else what it printed on stderr (or how it ended).
std::string RunTool(std::vector<std::string> args) {
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return "pipe: " + Errno(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string path_env = "PATH=/usr/sbin:/sbin:/usr/bin:/bin";
  char* envp[] = {path_env.data(), nullptr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  close(err_pipe[1]);
  if (rc != 0) {
    close(err_pipe[0]);
    return args[0] + ": " + Errno(rc);
  }
  std::string err;
  char buf[512];
  for (ssize_t n; (n = read(err_pipe[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (err.size() < 4096) err.append(buf, static_cast<size_t>(n));
  }
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
  if (err.empty()) {
    err = WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                            : "killed by signal " + std::to_string(WTERMSIG(status));
  }
  return args[0] + ": " + err;
}

}  // namespace

std::unique_ptr<JobDisk> JobDisk::Make(const std::string& attempt_dir, int mib, uid_t uid,
                                       gid_t gid) {
  std::unique_ptr<JobDisk> disk(new JobDisk(attempt_dir + "/disk.img", mib));
  // A new file in the root-only attempt dir: nothing of the job's is followed.
  disk->image_fd_ = open(disk->image_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                         0600);
  if (disk->image_fd_ < 0) {
    throw DriverError("disk: cannot create " + disk->image_ + ": " + Errno(errno));
  }
  // Sparse: the host's disk is taken as the job writes, never past mib.
  if (ftruncate(disk->image_fd_, static_cast<off_t>(mib) << 20) != 0) {
    throw DriverError("disk: cannot size " + disk->image_ + " to " + std::to_string(mib) +
                      " MiB: " + Errno(errno));
  }
  // No journal (the job's scratch space does not outlive it), no blocks
  // reserved for root, the root directory the job's.
  std::string failed =
      RunTool({"mke2fs", "-q", "-F", "-t", "ext4", "-m", "0", "-O", "^has_journal", "-E",
               "root_owner=" + std::to_string(uid) + ":" + std::to_string(gid) + ",nodiscard",
               disk->image_});
  if (!failed.empty()) throw DriverError("disk: formatting the job's filesystem failed: " + failed);
  disk->Attach();
  return disk;
}

void JobDisk::Attach() {
  int control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (control < 0) throw DriverError("disk: cannot open /dev/loop-control: " + Errno(errno));
  int last_err = 0;
  // Another process may take the free device between asking and attaching.
  for (int tries = 0; tries < 32 && loop_fd_ < 0; ++tries) {
    int n = ioctl(control, LOOP_CTL_GET_FREE);
    if (n < 0) {
      last_err = errno;
      break;
    }
    std::string device = "/dev/loop" + std::to_string(n);
    int fd = open(device.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {  // a /dev without devtmpfs
      mknod(device.c_str(), S_IFBLK | 0600, makedev(7, static_cast<unsigned>(n)));
      fd = open(device.c_str(), O_RDWR | O_CLOEXEC);
    }
    if (fd < 0) {
      last_err = errno;
      continue;
    }
    loop_config config{};
    config.fd = static_cast<uint32_t>(image_fd_);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    if (ioctl(fd, LOOP_CONFIGURE, &config) == 0) {
      loop_fd_ = fd;
      device_ = device;
      break;
    }
    last_err = errno;
    close(fd);
    if (last_err != EBUSY) break;
  }
  close(control);
  if (loop_fd_ < 0) {
    throw DriverError("disk: cannot attach " + image_ + " to a loop device: " + Errno(last_err));
  }
}

void JobDisk::Mounted(int work_fd) {
  work_fd_ = work_fd;
  if (loop_fd_ >= 0) close(loop_fd_);
  loop_fd_ = -1;
}

std::string JobDisk::End() {
  std::string full;
  struct statfs st {};
  if (work_fd_ >= 0 && fstatfs(work_fd_, &st) == 0) {
    const unsigned long long free_bytes =
        static_cast<unsigned long long>(st.f_bavail) * static_cast<unsigned long long>(st.f_bsize);
    const std::string limit = " (limit " + std::to_string(mib_) + " MiB)";
    // ext4 refuses writes with a little still free (its own metadata's
    // reserve): 419 KiB of a 16 MiB disk, seen here.
    const unsigned long long total =
        static_cast<unsigned long long>(st.f_blocks) * static_cast<unsigned long long>(st.f_bsize);
    if (free_bytes < std::max(1ULL << 20, total / 50)) {
      full = "disk full" + limit;
    } else if (st.f_files > 0 && st.f_ffree == 0) {
      full = "disk out of inodes" + limit;
    }
  }
  if (work_fd_ >= 0) close(work_fd_);
  work_fd_ = -1;
  if (loop_fd_ >= 0) close(loop_fd_);
  loop_fd_ = -1;
  if (image_fd_ >= 0) close(image_fd_);
  image_fd_ = -1;
  unlink(image_.c_str());
  return full;
}

JobDisk::~JobDisk() { End(); }

}  // namespace pgfleet::hostd::container
