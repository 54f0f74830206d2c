// The container driver against the real kernel: users, capabilities,
// filesystem writes, environment, network, signals and start errors.
// Needs root and cgroups (container_fixture.h says why tests fail, never skip).

#include <fcntl.h>
#include <pwd.h>

#include "container_fixture.h"

namespace pgfleet::hostd::testing_container {
namespace {

// A suite of its own (gtest wants one fixture class per suite name).
class ContainerSecurityTest : public ContainerDriverTest {
 protected:
  // The driver's refusal of an unprivileged `id` job running as `user`
  // (a failure, and "", when it ran).
  std::string RefusalOf(const std::string& user) {
    RunRequest req = Request({"id"});
    req.spec.user = user;
    try {
      Result r = Run(req);
      ADD_FAILURE() << user << " ran: " << r.output;
    } catch (const DriverError& e) {
      return e.what();
    }
    return "";
  }
};

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

TEST_F(ContainerSecurityTest, NonRootJobHasNoCapabilitiesAndNoNewPrivs) {
  Result r = Run(Request(
      {"grep", "-E", "^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)", "/proc/self/status"}));
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  for (const auto& line : Lines(r.output)) {
    if (line.rfind("NoNewPrivs", 0) == 0) {
      EXPECT_EQ(Trim(line.substr(11)), "1") << line;
    } else {
      EXPECT_NE(line.find("0000000000000000"), std::string::npos) << line;
    }
  }
}

TEST_F(ContainerSecurityTest, RootOnlyWhenAskedAndWithDockersCapabilities) {
  RunRequest req = Request({"sh", "-c", "id -u; grep CapBnd /proc/self/status"});
  req.spec.user = "root";
  req.spec.privileged = true;  // as the dispatch's ticket marks it
  Result r = Run(req);
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "0\nCapBnd:\t00000000a80425fb\n");
}

// Every spelling that names uid 0 or gid 0 on the host, or a number that
// would wrap to it, is refused for an unprivileged job before anything runs
// (behind the same rules at insert and in the dispatch's spec).
TEST_F(ContainerSecurityTest, NoSpellingOfRootRunsAnUnprivilegedJob) {
  for (const char* user : {"root", "0", "00", "0:0", "0:1000", "1000:0", "1000:000",
                                  "4294967296", "1000:4294967296", "99999999999"}) {
    std::string what = RefusalOf(user);
    EXPECT_TRUE(what.find("only privileged jobs may run") != std::string::npos ||
                what.find("user ids must be at most 2147483647") != std::string::npos)
        << user << ": " << what;
  }
}

// hostd refuses a --job-ids range holding a host account (it checks at start).
TEST_F(ContainerSecurityTest, AnIdRangeHoldingAHostAccountIsNamed) {
  EXPECT_EQ(JobIdRangeConflict(JobIdRange{}), "");
  std::string taken = JobIdRangeConflict(JobIdRange{1, 1});  // daemon, on Debian
  EXPECT_EQ(taken, "user daemon (uid 1, gid 1)");
  passwd* nobody = getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  // nobody, or another account in its group (Debian's _apt is in nogroup).
  EXPECT_NE(JobIdRangeConflict(JobIdRange{nobody->pw_uid, 1}).find(std::to_string(nobody->pw_uid)),
            std::string::npos);
}

// Ids of the job's user namespace past its 65536 are refused before anything runs.
TEST_F(ContainerSecurityTest, UnprivilegedIdsPastTheNamespaceAreRefused) {
  for (const char* user : {"65536", "70000:1000", "1000:65536", "2147483647"}) {
    std::string what = RefusalOf(user);
    EXPECT_NE(what.find("must be below 65536"), std::string::npos) << user << ": " << what;
  }
}

// An unprivileged job runs in a user namespace of its own: whatever its
// run_as names (a host account, its groups, plain numbers), its processes
// hold only ids of hostd's --job-ids range on the host, so a host account's
// 0600 file is not the job's to read, nor that account's file in the job's
// own directory its to write, although the job "is" that account inside.
TEST_F(ContainerSecurityTest, UnprivilegedJobsHoldOnlyIdsOfTheRangeWhateverTheyRunAs) {
  const JobIdRange range;  // the driver's (the fixture gives no --job-ids)
  const std::string dir = root_ + "/host-files";
  mkdir(dir.c_str(), 0755);
  std::vector<std::string> users = {"nobody", "daemon", "1", "1:1", "0001:00001", "42:7", "65534"};
  if (getpwnam("postgres")) users.push_back("postgres");
  for (const std::string& user : users) {
    SCOPED_TRACE(user);
    // The account run_as names, as the host knows it.
    uid_t host_uid = 65534;
    gid_t host_gid = 65534;
    if (passwd* pw = getpwnam(user.c_str())) {
      host_uid = pw->pw_uid;
      host_gid = pw->pw_gid;
    } else {
      host_uid = static_cast<uid_t>(std::stoul(user.substr(0, user.find(':'))));
      host_gid = user.find(':') == std::string::npos
                     ? host_uid
                     : static_cast<gid_t>(std::stoul(user.substr(user.find(':') + 1)));
    }
    const std::string secret = dir + "/secret";
    ASSERT_EQ(RunShell("echo SECRET > " + secret + " && chown " + std::to_string(host_uid) + ":" +
                       std::to_string(host_gid) + " " + secret + " && chmod 0600 " + secret),
              0);
    RunRequest req = Request({"/bin/sh", "-c",
                              "cat " + secret + " 2>/dev/null; { echo x >> theirs; } 2>/dev/null && "
                              "echo WROTE; echo up; exec sleep 30"});
    req.spec.rootfs.clear();  // the host's tree, where the host's files are
    req.spec.user = user;
    const std::string theirs = req.job_dir + "/theirs";
    ASSERT_EQ(RunShell("touch " + theirs + " && chown " + std::to_string(host_uid) + ":" +
                       std::to_string(host_gid) + " " + theirs + " && chmod 0644 " + theirs),
              0);
    auto exec = driver_->Start(req);
    for (auto until = Clock::now() + std::chrono::seconds(10);
         ReadFile(req.log_path).find("up") == std::string::npos && Clock::now() < until;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::vector<long long> ids = pgfleet::testing::HostIdsOfProcess(exec->pid());
    exec->Signal(SIGKILL);
    exec->Wait();
    EXPECT_EQ(ReadFile(req.log_path), "up\n");
    ASSERT_FALSE(ids.empty());
    for (long long id : ids) {
      EXPECT_GE(id, static_cast<long long>(range.start));
      EXPECT_LT(id, static_cast<long long>(range.start) + range.count);
    }
    EXPECT_EQ(ReadFile(theirs), "");
  }
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

// A setuid-root binary in the job's work dir (left there, as the job
// cannot make one) gives it nothing: the work dir is mounted nosuid, the
// job runs with no_new_privs, and root is not even a user of its namespace.
// Privileged jobs (root's ids, no user namespace) too: nosuid and
// no_new_privs hold for them.
TEST_F(ContainerSecurityTest, NoSetuidBinaryInTheWorkDirGainsPrivileges) {
  for (auto [privileged, seccomp] : {std::pair{false, "default"}, std::pair{true, "default"},
                                     std::pair{true, "unconfined"}}) {
    SCOPED_TRACE(std::string(privileged ? "privileged " : "unprivileged ") + seccomp);
    RunRequest req = Request({"/bin/sh", "-c", "./suid-id -u; ./suid-id -un 2>/dev/null; true"});
    req.spec.rootfs.clear();
    req.spec.privileged = privileged;
    req.spec.seccomp = seccomp;
    req.spec.user = "nobody";
    const std::string bin = req.job_dir + "/suid-id";
    ASSERT_EQ(RunShell("cp /usr/bin/id " + bin + " && chown 0:0 " + bin + " && chmod 4755 " + bin),
              0);
    Result r = Run(req);
    EXPECT_EQ(r.status.exit_code, 0) << r.output;
    EXPECT_EQ(Lines(r.output).at(0), "65534") << r.output;
    EXPECT_EQ(r.output.find("root"), std::string::npos) << r.output;
  }
}

// Unprivileged jobs run under the default seccomp filter
// (hostd/drivers/container/seccomp_filter.h): no new user namespace (where the job
// would be root again), no mount, no kernel keyring; privileged jobs without.
TEST_F(ContainerSecurityTest, UnprivilegedJobsRunUnderTheSeccompFilter) {
  const std::string script =
      "grep Seccomp: /proc/self/status; "
      "/usr/bin/unshare -U true 2>/dev/null && echo UNSHARED; "
      "/usr/bin/unshare -r true 2>/dev/null && echo ROOT_IN_USERNS; "
      "mount -t tmpfs none /tmp 2>/dev/null && echo MOUNTED; "
      "echo end";
  RunRequest req = Request({"/bin/sh", "-c", script});
  req.spec.rootfs.clear();  // the host's tree: util-linux's unshare
  Result r = Run(req);
  EXPECT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "Seccomp:\t2\nend\n");

  // Privileged jobs too, unless they opt out (seccomp unconfined); an
  // unprivileged job cannot (the database and hostd refuse it, and the
  // driver applies the filter all the same).
  RunRequest privileged = Request({"/bin/sh", "-c", "grep Seccomp: /proc/self/status"});
  privileged.spec.rootfs.clear();
  privileged.spec.privileged = true;
  EXPECT_EQ(Run(privileged).output, "Seccomp:\t2\n");
  RunRequest unconfined = Request({"/bin/sh", "-c", "grep Seccomp: /proc/self/status"});
  unconfined.spec.rootfs.clear();
  unconfined.spec.privileged = true;
  unconfined.spec.seccomp = "unconfined";
  EXPECT_EQ(Run(unconfined).output, "Seccomp:\t0\n");
  unconfined.spec.privileged = false;
  unconfined = Request(unconfined.spec.command);
  unconfined.spec.rootfs.clear();
  unconfined.spec.seccomp = "unconfined";
  EXPECT_EQ(Run(unconfined).output, "Seccomp:\t2\n");
}

TEST_F(ContainerSecurityTest, EnvironmentIsTheSpecsPlusPathAndTheJobsIds) {
  RunRequest req = Request({"env"});
  req.spec.env = {{"GREETING", "hello world"}};
  Result r = Run(req);
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  EXPECT_EQ(r.output,
            "GREETING=hello world\n"
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
            "PGFLEET_JOB_ID=" + std::to_string(req.job_id) + "\n" +
            "PGFLEET_ATTEMPT=" + std::to_string(req.attempt) + "\n");
}

TEST_F(ContainerSecurityTest, NetworkNoneLeavesOnlyLoopback) {
  RunRequest req = Request({"cat", "/proc/net/dev"});
  req.spec.network = "none";
  Result r = Run(req);
  ASSERT_EQ(r.status.exit_code, 0) << r.output;
  auto lines = Lines(r.output);
  ASSERT_EQ(lines.size(), 3u) << r.output;  // two header lines and lo
  EXPECT_EQ(Trim(lines[2]).rfind("lo:", 0), 0u) << r.output;

  RunRequest lo = Request({"ifconfig", "lo"});
  lo.spec.network = "none";
  Result l = Run(lo);
  EXPECT_NE(l.output.find("UP LOOPBACK"), std::string::npos) << l.output;

  RunRequest host = Request({"cat", "/proc/net/dev"});
  Result h = Run(host);
  EXPECT_EQ(Lines(h.output).size(), Lines(ReadFile("/proc/net/dev")).size()) << h.output;
}

TEST_F(ContainerSecurityTest, SigtermReachesAJobThatHandlesIt) {
  auto exec =
      driver_->Start(Request({"sh", "-c", "trap 'exit 7' TERM; while :; do sleep 0.05; done"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  exec->Signal(SIGTERM);
  ExitStatus s = exec->Wait();
  EXPECT_EQ(s.exit_code, 7);
}

TEST_F(ContainerSecurityTest, SigtermEndsAJobWithoutAHandlerAndSigkillOneThatIgnoresIt) {
  // The job is not PID 1 (the container's init is): a signal it has no
  // handler for acts as it would anywhere else.
  auto exec = driver_->Start(Request({"sleep", "100"}));
  exec->Signal(SIGTERM);
  ExitStatus s = exec->Wait();
  EXPECT_EQ(s.signal, SIGTERM);
  EXPECT_EQ(s.exit_code, -1);
  exec->Signal(SIGKILL);  // after exit: does nothing

  auto deaf = driver_->Start(Request({"sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  deaf->Signal(SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string stat = ReadFile("/proc/" + std::to_string(deaf->pid()) + "/stat");
  ASSERT_FALSE(stat.empty()) << "a job that ignores SIGTERM ended on it";
  deaf->Signal(SIGKILL);
  s = deaf->Wait();
  EXPECT_EQ(s.signal, SIGKILL);
}

TEST_F(ContainerSecurityTest, TheInitReapsOrphansAndEndsWithTheJob) {
  // The job leaves a child behind that outlives it by far: the container
  // (and the Wait) ends with the job, not with the orphan.
  auto t0 = std::chrono::steady_clock::now();
  auto exec = driver_->Start(Request({"sh", "-c", "sleep 300 & sleep 0.2; exit 4"}));
  ExitStatus s = exec->Wait();
  EXPECT_EQ(s.exit_code, 4);
  EXPECT_EQ(s.signal, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST_F(ContainerSecurityTest, ExecFailureIsADriverError) {
  RunRequest req = Request({"no-such-command"});
  try {
    driver_->Start(req);
    FAIL() << "Start succeeded";
  } catch (const DriverError& e) {
    EXPECT_STREQ(e.what(), "exec \"no-such-command\": No such file or directory");
  }
}

TEST_F(ContainerSecurityTest, MissingRootfsIsADriverErrorNamingIt) {
  RunRequest req = Request({"true"});
  req.spec.rootfs = "no-such-image";
  try {
    driver_->Start(req);
    FAIL() << "Start succeeded";
  } catch (const DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("rootfs \"no-such-image\" not found"), std::string::npos)
        << e.what();
  }
}

TEST_F(ContainerSecurityTest, UnknownUserIsADriverError) {
  RunRequest req = Request({"true"});
  req.spec.user = "no-such-user";
  EXPECT_THROW(driver_->Start(req), DriverError);
}

TEST_F(ContainerSecurityTest, JobsStartConcurrentlyFromSeveralThreads) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        RunRequest req;
        {
          static std::mutex mu;
          std::lock_guard<std::mutex> lock(mu);
          req = Request({"hostname"});
        }
        Result r = Run(req);
        if (r.status.exit_code == 0 && r.output == std::to_string(req.job_id) + "\n") ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 80);
}


}  // namespace
}  // namespace pgfleet::hostd::testing_container
