// The container driver against the real kernel: what a job may do as whom.
// Root only when privileged, with Docker's capabilities; no spelling of
// root and no id past its user namespace for an unprivileged job, which
// holds only ids of hostd's --job-ids range on the host, no capabilities and
// no_new_privs; no setuid binary gains anything; the seccomp filter. Needs
// root and cgroups (container_fixture.h says why tests fail, never skip).

#include <pwd.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "container_security_fixture.h"

namespace pgfleet::hostd::testing_container {
namespace {

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

}  // namespace
}  // namespace pgfleet::hostd::testing_container
