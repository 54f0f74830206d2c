// hostd's writer of job files (hostd/drivers/job_files_writer.h) on a real
// directory: files and their directories land under the work dir with their
// modes and owner; a link or a file planted where a component goes fails
// the write and nothing is written outside; paths are checked again.

#include "hostd/drivers/job_files_writer.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include "hostd/drivers/driver.h"
#include "test_support.h"

namespace pgfleet::hostd {
namespace {

using pgfleet::testing::TempDir;

model::JobFile File(std::string content, int mode = 0644, bool base64 = false) {
  model::JobFile f;
  f.content = std::move(content);
  f.mode = mode;
  f.base64 = base64;
  return f;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class JobFilesWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = tmp_.path() + "/work";
    outside_ = tmp_.path() + "/outside";
    ASSERT_EQ(0, mkdir(work_.c_str(), 0700));
    ASSERT_EQ(0, mkdir(outside_.c_str(), 0755));
  }
  // Writes through an O_PATH descriptor of the work dir, as the drivers do;
  // returns the DriverError's message, "" when it wrote.
  std::string Write(const model::JobFiles& files) {
    int fd = open(work_.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    std::string error;
    try {
      WriteJobFiles(fd, files, geteuid(), getegid());
    } catch (const DriverError& e) {
      error = e.what();
    }
    close(fd);
    return error;
  }
  // Nothing at all was made outside the work dir.
  void ExpectOutsideEmpty() { EXPECT_EQ("", Listing(outside_)); }
  // The names in dir but . and .., sorted.
  static std::string Listing(const std::string& dir) {
    std::set<std::string> names;
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.insert(e->d_name);
      }
      closedir(d);
    }
    std::string out;
    for (const auto& n : names) out += n + " ";
    return out;
  }

  TempDir tmp_;
  std::string work_, outside_;
};

TEST_F(JobFilesWriterTest, WritesFilesAndDirectoriesWithTheirModesAndBytes) {
  model::JobFiles files;
  files["run.sh"] = File("#!/bin/sh\necho hi\n", 0755);
  files["conf/app.ini"] = File("a = 1\n", 0600);
  files["conf/deeper/x"] = File("", 0);
  files["bin"] = File(model::Base64(std::string("\x00\x01\xff", 3)), 0644, true);
  ASSERT_EQ("", Write(files));
  struct stat st {};
  ASSERT_EQ(0, lstat((work_ + "/run.sh").c_str(), &st));
  EXPECT_EQ(0755u, st.st_mode & 07777);
  EXPECT_EQ(geteuid(), st.st_uid);
  EXPECT_EQ("#!/bin/sh\necho hi\n", Read(work_ + "/run.sh"));
  ASSERT_EQ(0, lstat((work_ + "/conf/app.ini").c_str(), &st));
  EXPECT_EQ(0600u, st.st_mode & 07777);
  ASSERT_EQ(0, lstat((work_ + "/conf/deeper/x").c_str(), &st));
  EXPECT_EQ(0u, st.st_mode & 07777);
  ASSERT_EQ(0, lstat((work_ + "/conf/deeper").c_str(), &st));
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(0755u, st.st_mode & 07777);
  EXPECT_EQ(std::string("\x00\x01\xff", 3), Read(work_ + "/bin"));
}

TEST_F(JobFilesWriterTest, ALinkOrAFileWhereAComponentGoesFailsAndWritesNothingOutside) {
  struct Plant {
    std::string name, target, path;  // a link name -> target in the work dir; the file's path
  };
  const std::vector<Plant> plants = {
      {"conf", outside_, "conf/app.ini"},                    // a directory component
      {"deep", outside_, "deep/er/x"},                       // the first of several
      {"run.sh", outside_ + "/run.sh", "run.sh"},            // the file itself, dangling
      {"dot", ".", "dot/x"},                                 // a link to the work dir itself
      {"up", "..", "up/outside/x"},                          // a link upward
  };
  for (const auto& p : plants) {
    SCOPED_TRACE(p.name);
    ASSERT_EQ(0, symlink(p.target.c_str(), (work_ + "/" + p.name).c_str()));
    model::JobFiles files{{p.path, File("pwned")}};
    const std::string error = Write(files);
    EXPECT_NE(std::string::npos, error.find("cannot write file \"" + p.path + "\"")) << error;
    EXPECT_NE(std::string::npos, error.find("a link")) << error;
    ExpectOutsideEmpty();
  }
  // A regular file where a directory goes, and a file that exists.
  std::ofstream(work_ + "/plain") << "x";
  EXPECT_NE(std::string::npos, Write({{"plain/x", File("y")}}).find("is not a directory"));
  EXPECT_NE(std::string::npos, Write({{"plain", File("y")}}).find("exists"));
  EXPECT_EQ("x", Read(work_ + "/plain"));
  // A FIFO where the file goes is not opened (it would block).
  ASSERT_EQ(0, mkfifo((work_ + "/fifo").c_str(), 0600));
  EXPECT_NE(std::string::npos, Write({{"fifo", File("y")}}).find("exists"));
}

TEST_F(JobFilesWriterTest, PathsAndModesAreCheckedAgainWhateverTheSpecSays) {
  for (const std::string& path :
       std::vector<std::string>{"../outside/x", "/tmp/x", "a/../../outside/x", "", ".", "a/./b",
                                "a//b", "a/", std::string(300, 'p')}) {
    SCOPED_TRACE(path);
    const std::string error = Write({{path, File("x")}});
    EXPECT_NE(std::string::npos, error.find("refusing the job's files: files paths")) << error;
  }
  for (int mode : {04755, 02755, 01777, -1, 01000}) {
    SCOPED_TRACE(mode);
    EXPECT_NE(std::string::npos, Write({{"x", File("x", mode)}}).find("files.*.mode")) << mode;
  }
  EXPECT_NE(std::string::npos, Write({{"x", File("!!", 0644, true)}}).find("base64"));
  ExpectOutsideEmpty();
  EXPECT_EQ("", Listing(work_));
}

}  // namespace
}  // namespace pgfleet::hostd
