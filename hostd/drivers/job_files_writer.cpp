#include "hostd/drivers/job_files_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "hostd/drivers/driver.h"

namespace pgfleet::hostd {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

[[noreturn]] void Fail(const std::string& path, const std::string& what, int err) {
  throw DriverError("cannot write file \"" + path + "\" of the job: " + what +
                    (err ? std::string(": ") + std::strerror(err) : std::string()));
}

// The directory `name` in dir_fd, made (owned by uid:gid) when missing; never
// a link. Returns its descriptor.
int OpenOrMakeDir(int dir_fd, const std::string& name, const std::string& path, uid_t uid,
                  gid_t gid) {
  bool made = false;
  if (mkdirat(dir_fd, name.c_str(), 0755) == 0) {
    made = true;
  } else if (errno != EEXIST) {
    Fail(path, "making directory " + name, errno);
  }
  int fd = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    Fail(path, name + " exists and is not a directory (a link or a file)",
         err == ELOOP || err == ENOTDIR ? 0 : err);
  }
  if (made && (fchown(fd, uid, gid) != 0 || fchmod(fd, 0755) != 0)) {
    const int err = errno;
    close(fd);
    Fail(path, "giving directory " + name + " to its owner", err);
  }
  return fd;
}

void WriteAll(int fd, const std::string& bytes, const std::string& path) {
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Fail(path, "writing", n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
}

void WriteOne(int work_dir_fd, const std::string& path, const model::JobFile& file, uid_t uid,
              gid_t gid) {
  std::vector<std::string> parts;
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  std::vector<std::unique_ptr<Fd>> dirs;  // each directory of the path, from the work dir down
  int dir = work_dir_fd;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    dirs.push_back(std::make_unique<Fd>(OpenOrMakeDir(dir, parts[i], path, uid, gid)));
    dir = dirs.back()->get();
  }
  const std::string bytes = model::FileBytes(file);
  Fd fd(openat(dir, parts.back().c_str(),
               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600));
  if (fd.get() < 0) {
    const int err = errno;
    Fail(path, err == EEXIST ? "something of that name exists (a link or a file)" : "creating it",
         err == EEXIST ? 0 : err);
  }
  WriteAll(fd.get(), bytes, path);
  // The owner first: chown clears the set-id bits a mode can no longer have anyway.
  if (fchown(fd.get(), uid, gid) != 0) Fail(path, "giving it to its owner", errno);
  if (fchmod(fd.get(), static_cast<mode_t>(file.mode) & 0777) != 0) {
    Fail(path, "setting its mode", errno);
  }
}

}  // namespace

void WriteJobFiles(int work_dir_fd, const model::JobFiles& files, uid_t uid, gid_t gid) {
  if (files.empty()) return;
  try {
    model::ValidateJobFiles(files);
  } catch (const model::SpecError& e) {
    throw DriverError(std::string("refusing the job's files: ") + e.what());
  }
  for (const auto& [path, file] : files) WriteOne(work_dir_fd, path, file, uid, gid);
}

}  // namespace pgfleet::hostd
