// The container driver against the real kernel: what a job may write. An
// unprivileged job writes only its work dir and /tmp, in a rootfs or on the
// host's tree, never sees hostd's data dir, and has a disk of its own size
// that it cannot write past. Needs root and cgroups (container_fixture.h
// says why tests fail, never skip).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "container_security_fixture.h"

namespace pgfleet::hostd::testing_container {
namespace {

TEST_F(ContainerSecurityTest, NobodyCannotWriteOutsideWorkDirAndTmpInARootfs) {
  const char* script =
      "touch /work/ok || echo FAIL /work; touch /tmp/ok || echo FAIL /tmp;"
      "for p in /x /etc/x /bin/x /root/x /dev/x /proc/x /sys/x /work/../x; do"
      "  touch $p 2>/dev/null && echo WROTE $p; done; id -u";
  RunRequest req = Request({"sh", "-c", script});
  Result r = Run(req);
  EXPECT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "65534\n");
  struct stat st {};
  EXPECT_EQ(stat((req.job_dir + "/ok").c_str(), &st), 0) << "the work dir is not the job's";
}

TEST_F(ContainerSecurityTest, NobodyCannotWriteOutsideWorkDirAndTmpOnTheHostFilesystem) {
  std::string script =
      "touch ./ok || echo FAIL work; touch /tmp/ok || echo FAIL /tmp;"
      "for p in /x /etc/x /usr/x /var/tmp/x /root/x /home/x /dev/x " +
      data_dir_ + "/x; do touch $p 2>/dev/null && echo WROTE $p; done; id -u";
  RunRequest req = Request({"/bin/sh", "-c", script});
  req.spec.rootfs.clear();
  Result r = Run(req);
  EXPECT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "65534\n");
  struct stat st {};
  EXPECT_EQ(stat((req.job_dir + "/ok").c_str(), &st), 0);
  EXPECT_NE(stat("/tmp/ok", &st), 0) << "the job wrote to the host's /tmp";
}

TEST_F(ContainerSecurityTest, HostFilesystemModeHidesHostdDataDir) {
  RunRequest req = Request({"/bin/ls", data_dir_});
  req.spec.rootfs.clear();
  Result r = Run(req);
  EXPECT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("rootfs"), std::string::npos) << r.output;
}

// A job's disk: its work dir is a filesystem of that size of its own. A job
// writing past it gets ENOSPC, fails with "disk full", never had more of
// the host's disk than its image (sparse, in the root-only attempt dir), and
// the image is gone when it ends. Within it, the job owns its work dir.
TEST_F(ContainerSecurityTest, AJobWritingPastItsDiskFailsAndTakesNoMoreOfTheHostsDisk) {
  RunRequest req = Request({"sh", "-c",
                            "dd if=/dev/zero of=big bs=1M count=40 2>/dev/null; echo dd=$?; "
                            "sync -f .; df -k . | tail -1 | awk '{print ($3 > 12000)}'; "
                            "exec sleep 30"});
  req.spec.rootfs.clear();
  req.spec.disk = 16;
  auto exec = driver_->Start(req);
  for (auto until = Clock::now() + std::chrono::seconds(20);
       Lines(ReadFile(req.log_path)).size() < 2 && Clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // dd failed (ENOSPC), after filling its disk (over 12,000 KiB used).
  EXPECT_EQ(ReadFile(req.log_path), "dd=1\n1\n");
  struct stat image {};
  {
    // What the job wrote, on the host's disk (the loop device writes
    // through the image's page cache).
    int fd = open((req.attempt_dir + "/disk.img").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    fsync(fd);
    ASSERT_EQ(fstat(fd, &image), 0);
    close(fd);
  }
  // (the host's own extent blocks of the image aside)
  EXPECT_LE(image.st_blocks * 512, (16LL << 20) + (256 << 10))
      << "the host gave the job more than its disk";
  struct stat st {};
  EXPECT_NE(stat((req.job_dir + "/big").c_str(), &st), 0) << "written to the host's work dir";
  exec->Signal(SIGKILL);
  ExitStatus status = exec->Wait();
  EXPECT_EQ(status.error, "disk full (limit 16 MiB)");
  EXPECT_NE(stat((req.attempt_dir + "/disk.img").c_str(), &st), 0) << "the image outlived the job";

  // Within its disk a job works as usual, in a work dir of its own user.
  RunRequest fits = Request({"sh", "-c",
                             "head -c 1048576 /dev/zero > f && id -u && stat -c %u . && "
                             "df -k . | tail -1 | awk '{print ($2 > 4000 && $2 <= 8192)}'"});
  fits.spec.disk = 8;
  Result r = Run(fits);
  EXPECT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "65534\n65534\n1\n");
  EXPECT_EQ(r.status.error, "");

  // The same for a privileged job (no user namespace: host ids).
  RunRequest privileged =
      Request({"/bin/sh", "-c", "head -c 9000000 /dev/zero > f; rc=$?; stat -c %s f; exit $rc"});
  privileged.spec.rootfs.clear();
  privileged.spec.privileged = true;
  privileged.spec.disk = 4;
  Result p = Run(privileged);
  auto lines = Lines(p.output);
  ASSERT_EQ(lines.size(), 2u) << p.output;
  EXPECT_NE(lines[0].find("No space left on device"), std::string::npos) << p.output;
  EXPECT_LE(std::stoll(lines[1]), 4LL << 20);
  EXPECT_EQ(p.status.exit_code, 1);
  EXPECT_EQ(p.status.error, "disk full (limit 4 MiB)");
}

}  // namespace
}  // namespace pgfleet::hostd::testing_container
