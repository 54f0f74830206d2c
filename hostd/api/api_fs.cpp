// GET /v1/jobs/{id}/fs?path=P[&attempt=N]: a directory of a job's sandbox as
// JSON, or a file's bytes (pgfleet fs).
//
// The sandbox is what the job sees: for a running container job, its root
// filesystem through /proc/<pid>/root (its mounts included); otherwise (the
// process driver, or a container job that has ended) its working directory
// (<attempt dir>/work: a container's /work, or its own path on the host's
// tree). A container job's files are opened with the job's identity: what it
// could not read, fs does not show.
// Paths resolve inside that root and never leave it: ".." is refused, and
// every symlink on the way resolves as if the root were "/"
// (openat2 RESOLVE_IN_ROOT), so neither can reach the host's files.

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/util/text.h"
#include "hostd/api/api_routes.h"
#include "hostd/attempt/attempt_dir.h"

namespace pgfleet::hostd::routes {
namespace {

using nlohmann::json;

constexpr size_t kMaxEntries = 10000;
constexpr size_t kFileChunk = 64 * 1024;

// "/etc/hostname" -> "etc/hostname" (relative to the sandbox's root). Throws
// RequestError 400 naming the rule for what may not be asked.
std::string SandboxRelative(const std::string& path) {
  if (path.size() > 4096) throw RequestError(400, "path", "path must be at most 4096 bytes");
  if (path.find('\0') != std::string::npos) {
    throw RequestError(400, "path", "path must not contain NUL bytes");
  }
  std::string out;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(pos, end - pos);
    if (part == "..") {
      throw RequestError(400, "path",
                             "path must not contain \"..\": it stays inside the job's "
                             "sandbox (got \"" +
                                 path + "\")");
    }
    if (!part.empty() && part != ".") out += (out.empty() ? "" : "/") + part;
    pos = end + 1;
  }
  return out.empty() ? "." : out;
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// Opens rel under root_fd as if root_fd were "/" (no escape by ".." or symlinks).
int OpenInRoot(int root_fd, const std::string& rel, uint64_t flags) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how));
}

// Whose files a job's are, for reading them as it would.
struct JobIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

// The file-system ids and groups of a running process, from its status file
// read through proc_fd (/proc/<pid>, opened once: the root and the identity
// are one process's, never a reused pid's).
std::optional<JobIdentity> IdentityOfProcess(int proc_fd) {
  int fd = openat(proc_fd, "status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fd);
  std::istringstream in(text);
  JobIdentity id;
  bool uid = false, gid = false;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    unsigned long long v[4];
    if (key == "Uid:" || key == "Gid:") {
      if (!(fields >> v[0] >> v[1] >> v[2] >> v[3])) return std::nullopt;
      (key == "Uid:" ? id.uid : id.gid) = static_cast<uint32_t>(v[3]);  // the file-system id
      (key == "Uid:" ? uid : gid) = true;
    } else if (key == "Groups:") {
      for (unsigned long long g; fields >> g;) id.groups.push_back(static_cast<gid_t>(g));
    }
  }
  if (!uid || !gid) return std::nullopt;
  return id;
}

// The owner of a directory (an ended container job's work dir, which the
// driver gave to the job's user).
std::optional<JobIdentity> IdentityOfOwner(int dir_fd) {
  struct stat st {};
  if (fstat(dir_fd, &st) != 0) return std::nullopt;
  return JobIdentity{st.st_uid, st.st_gid, {st.st_gid}};
}

// For the calling thread only, while it lives: files are opened with `id`'s
// permissions (its file-system uid and gid and its groups: the kernel then
// drops this thread's CAP_DAC_OVERRIDE and kin). Raw syscalls act on the
// calling thread alone; glibc's wrappers would change every thread of hostd.
class ActingAs {
 public:
  explicit ActingAs(const JobIdentity& id) : uid_(geteuid()), gid_(getegid()) {
    int n = getgroups(0, nullptr);
    groups_.resize(n > 0 ? static_cast<size_t>(n) : 0);
    if (n > 0) getgroups(n, groups_.data());
    syscall(SYS_setgroups, id.groups.size(), id.groups.data());
    syscall(SYS_setfsgid, id.gid);
    syscall(SYS_setfsuid, id.uid);
  }
  ~ActingAs() {
    syscall(SYS_setfsuid, uid_);
    syscall(SYS_setfsgid, gid_);
    syscall(SYS_setgroups, groups_.size(), groups_.data());
  }
  ActingAs(const ActingAs&) = delete;
  ActingAs& operator=(const ActingAs&) = delete;

 private:
  uid_t uid_;
  gid_t gid_;
  std::vector<gid_t> groups_;
};

const char* TypeOf(mode_t m) {
  if (S_ISDIR(m)) return "dir";
  if (S_ISREG(m)) return "file";
  if (S_ISLNK(m)) return "symlink";
  return "other";
}

void ListDirectory(int dir_fd, const std::string& shown, httplib::Response& res) {
  json entries = json::array();
  bool truncated = false;
  int fd = dup(dir_fd);
  DIR* d = fd >= 0 ? fdopendir(fd) : nullptr;
  if (!d) {
    if (fd >= 0) close(fd);
    throw std::runtime_error("cannot read directory " + shown + ": " + strerror(errno));
  }
  std::vector<json> found;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (found.size() == kMaxEntries) {
      truncated = true;
      break;
    }
    struct stat st {};
    json entry = {{"name", util::SanitizeUtf8(name)}};
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      entry["type"] = TypeOf(st.st_mode);
      entry["size"] = static_cast<int64_t>(st.st_size);
      entry["mode"] = mode;
      entry["modified"] = util::IsoTime(static_cast<int64_t>(st.st_mtime));
    } else {
      entry["type"] = "gone";  // removed while we listed
    }
    found.push_back(std::move(entry));
  }
  closedir(d);
  std::sort(found.begin(), found.end(),
            [](const json& a, const json& b) { return a["name"] < b["name"]; });
  for (auto& e : found) entries.push_back(std::move(e));
  json out = {{"path", shown}, {"type", "dir"}, {"entries", entries}, {"truncated", truncated}};
  res.set_content(out.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// Where a job's files are read from, and as whom.
struct Sandbox {
  std::string name;  // "container root" (a running container job) or "working directory"
  Fd root{-1};       // O_PATH
  // A container job's files are read as the job would read them: with its
  // uid, gid and groups (its running process's, else its work dir owner's),
  // so the host's files it sees but may not read (/etc/shadow) stay closed.
  // (The process driver runs only privileged jobs, as hostd's own user.)
  std::optional<JobIdentity> identity;
};

// The sandbox of the held attempt: RequestError 404 when it is gone.
Sandbox OpenSandbox(const Api& api, int64_t id, const HeldAttempt& held) {
  Sandbox box;
  box.name = "working directory";
  auto info = api.supervisor.Attempt(id, held.attempt);
  const bool container = api.supervisor.capabilities().has_own_root;
  Fd proc_fd(-1);
  if (container && info && info->pid > 0 && api.supervisor.Live(id, held.attempt)) {
    proc_fd.fd = open(("/proc/" + std::to_string(info->pid)).c_str(),
                      O_PATH | O_DIRECTORY | O_CLOEXEC);
    box.name = "container root";
  }
  const bool running = box.name == "container root";
  box.root.fd = running ? openat(proc_fd.fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC)
                        : open((held.dir + "/" + attempt::kWorkDir).c_str(),
                               O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  const std::string gone = "the sandbox of job " + std::to_string(id) + " attempt " +
                           std::to_string(held.attempt) + " is gone";
  if (box.root.fd < 0) throw RequestError(404, "", gone + " (" + strerror(errno) + ")");
  if (container) {
    box.identity = running ? IdentityOfProcess(proc_fd.fd) : IdentityOfOwner(box.root.fd);
    if (!box.identity) throw RequestError(404, "", gone + " (its identity is unknown)");
  }
  return box;
}

// Answers for a path that names a symlink: where it points, not followed.
void AnswerSymlink(int root_fd, const std::string& rel, const std::string& shown,
                   httplib::Response& res) {
  Fd link(OpenInRoot(root_fd, rel, O_PATH | O_NOFOLLOW));
  char target[4096];
  ssize_t n = link.fd >= 0 ? readlinkat(link.fd, "", target, sizeof target) : -1;
  json out = {{"path", shown}, {"type", "symlink"}};
  if (n >= 0) out["target"] = util::SanitizeUtf8(std::string(target, static_cast<size_t>(n)));
  res.set_content(out.dump(), "application/json");
}

// Streams a regular file's bytes, a chunk at a time, up to the size it had when asked.
void AnswerFile(const Api& api, const httplib::Request& req, std::shared_ptr<Fd> fd, size_t size,
                std::shared_ptr<void> hold, httplib::Response& res) {
  std::function<void()> touch = api.guard ? api.guard->Toucher(req) : [] {};
  res.set_content_provider(
      size, "application/octet-stream",
      [fd, hold, touch](size_t offset, size_t length, httplib::DataSink& sink) {
        touch();
        std::string buf(std::min(length, kFileChunk), '\0');
        ssize_t n = pread(fd->fd, buf.data(), buf.size(), static_cast<off_t>(offset));
        if (n <= 0) return false;  // shrank meanwhile: the answer ends short
        return sink.write(buf.data(), static_cast<size_t>(n));
      });
}

}  // namespace

void HandleFs(const Api& api, const httplib::Request& req, httplib::Response& res) {
  const int64_t id = JobIdOf(req);
  int attempt = IntParam(req, "attempt");
  const std::string shown = req.has_param("path") ? req.get_param_value("path") : "/";
  const std::string rel = SandboxRelative(shown);
  AuthorizeJobRequest(api, req, net::TicketKind::kFs, id, &attempt);
  RefuseIfSimulated(api, "no files for job " + std::to_string(id));
  HeldAttempt held = HoldAttemptDir(
      api, id, attempt,
      "job " + std::to_string(id) + (attempt > 0 ? " attempt " + std::to_string(attempt) : "") +
          " has no sandbox on this host");
  Sandbox box = OpenSandbox(api, id, held);
  std::optional<ActingAs> acting;
  if (box.identity) acting.emplace(*box.identity);
  auto fd = std::make_shared<Fd>(OpenInRoot(box.root.fd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  if (fd->fd < 0 && errno == ELOOP) return AnswerSymlink(box.root.fd, rel, shown, res);
  if (fd->fd < 0) {
    int err = errno;
    throw RequestError(err == ENOENT || err == ENOTDIR ? 404 : 403, "path",
                       "path: " + shown + ": " + strerror(err) + " (in the job's " + box.name + ")");
  }
  res.set_header("X-Pgfleet-Sandbox", box.name);
  struct stat st {};
  if (fstat(fd->fd, &st) != 0) throw std::runtime_error(std::string("fstat: ") + strerror(errno));
  if (S_ISDIR(st.st_mode)) return ListDirectory(fd->fd, shown, res);
  acting.reset();  // the descriptor is open: reading it checks nothing more
  if (!S_ISREG(st.st_mode)) {
    throw RequestError(400, "path",
                       "path: " + shown + " is a " + TypeOf(st.st_mode) +
                           ", not a regular file or directory: only those are read");
  }
  AnswerFile(api, req, fd, static_cast<size_t>(st.st_size), std::move(held.hold), res);
}

}  // namespace pgfleet::hostd::routes
