// Job files through the container driver against the real kernel
// (docs/files.md): written into the work dir before the job starts, owned
// by the job's user as its user namespace maps it, with their modes, on a
// job's own disk too; a link planted where a file or directory goes makes
// the start fail and writes nothing outside. Needs root and cgroups
// (container_fixture.h says why tests fail, never skip).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "container_fixture.h"

namespace pgfleet::hostd::testing_container {
namespace {

model::JobFile File(std::string content, int mode = 0644) {
  model::JobFile f;
  f.content = std::move(content);
  f.mode = mode;
  return f;
}

TEST_F(ContainerDriverTest, AJobRunsItsFileRunShOwnedByItsUserWithItsMode) {
  RunRequest req = Request({"./run.sh"});
  req.spec.files["run.sh"] = File("#!/bin/sh\necho ran as $(id -u); cat conf/app.ini\n", 0755);
  req.spec.files["conf/app.ini"] = File("color = blue\n", 0600);
  Result r = Run(req);
  EXPECT_EQ(r.status.exit_code, 0) << r.output << r.status.error;
  EXPECT_EQ(r.output, "ran as 65534\ncolor = blue\n");
  // On the host: the job's ids as its namespace maps them, the modes as asked.
  struct stat work {}, run {}, conf {}, ini {};
  ASSERT_EQ(0, stat(req.job_dir.c_str(), &work));
  ASSERT_EQ(0, lstat((req.job_dir + "/run.sh").c_str(), &run));
  ASSERT_EQ(0, lstat((req.job_dir + "/conf").c_str(), &conf));
  ASSERT_EQ(0, lstat((req.job_dir + "/conf/app.ini").c_str(), &ini));
  EXPECT_NE(0u, work.st_uid);
  for (const struct stat* st : {&run, &conf, &ini}) {
    EXPECT_EQ(work.st_uid, st->st_uid);
    EXPECT_EQ(work.st_gid, st->st_gid);
  }
  EXPECT_EQ(0755u, run.st_mode & 07777);
  EXPECT_EQ(0755u, conf.st_mode & 07777);
  EXPECT_EQ(0600u, ini.st_mode & 07777);
  EXPECT_TRUE(S_ISDIR(conf.st_mode));
}

TEST_F(ContainerDriverTest, FilesOfAJobWithADiskGoOntoItsDisk) {
  RunRequest req = Request({"sh", "-c", "./run.sh && df -k /work | tail -1 | awk '{print $2}'"});
  req.spec.disk = 16;
  req.spec.files["run.sh"] = File("#!/bin/sh\necho on its disk\n", 0755);
  Result r = Run(req);
  EXPECT_EQ(r.status.exit_code, 0) << r.output << r.status.error;
  EXPECT_EQ(0u, r.output.rfind("on its disk\n", 0)) << r.output;
  const long kib = std::stol(r.output.substr(r.output.find('\n') + 1));
  EXPECT_LT(kib, 17 * 1024) << "the work dir is not the job's 16 MiB disk";
}

TEST_F(ContainerDriverTest, ALinkPlantedAtAFilesPathFailsTheStartAndWritesNoHostFile) {
  const std::string outside = root_ + "/outside-" + std::to_string(next_job_);
  ASSERT_EQ(0, mkdir(outside.c_str(), 0755));
  // A link where a directory of the files goes, where a file goes, and a
  // dangling one (O_CREAT would make its target).
  const std::vector<std::pair<std::string, std::string>> plants = {
      {"conf", outside}, {"run.sh", outside + "/run.sh"}, {"dangling", outside + "/made"}};
  for (const auto& [name, target] : plants) {
    SCOPED_TRACE(name);
    RunRequest req = Request({"true"});
    ASSERT_EQ(0, symlink(target.c_str(), (req.job_dir + "/" + name).c_str()));
    req.spec.files[name == "conf" ? "conf/app.ini" : name] = File("pwned\n");
    try {
      driver_->Start(req);
      ADD_FAILURE() << "started";
    } catch (const DriverError& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find("cannot write file")) << e.what();
      EXPECT_NE(std::string::npos, std::string(e.what()).find("a link")) << e.what();
    }
    EXPECT_TRUE(Subdirs(outside).empty());
    struct stat st {};
    EXPECT_NE(0, lstat((outside + "/run.sh").c_str(), &st));
    EXPECT_NE(0, lstat((outside + "/made").c_str(), &st));
    EXPECT_NE(0, lstat((outside + "/app.ini").c_str(), &st));
  }
}

TEST_F(ContainerDriverTest, PathsThatLeaveTheWorkDirAreRefusedOnTheHostWhateverTheSpecSays) {
  for (const std::string path : {"../escape", "/tmp/escape", "a/../../escape", "a//b"}) {
    SCOPED_TRACE(path);
    RunRequest req = Request({"true"});
    req.spec.files[path] = File("x");  // past ParseJobSpec, as a bug or a forged spec would
    try {
      driver_->Start(req);
      ADD_FAILURE() << "started";
    } catch (const DriverError& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find("files paths must be relative"))
          << e.what();
    }
    struct stat st {};
    EXPECT_NE(0, lstat((req.attempt_dir + "/escape").c_str(), &st));
    EXPECT_NE(0, lstat("/tmp/escape", &st));
  }
}

}  // namespace
}  // namespace pgfleet::hostd::testing_container
