// GET /v1/jobs/{id}/fs?path=P[&attempt=N]: a directory of a job's sandbox as
// JSON, or a file's bytes (pgfleet fs).
//
// The sandbox is what the job sees: for a running container job, its root
// filesystem through /proc/<pid>/root (its mounts included); otherwise (the
// process driver, or a container job that has ended) its attempt directory,
// which is the process driver's working directory and a container's /work.
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
#include <nlohmann/json.hpp>

#include "core/model/job_spec.h"
#include "core/util/text.h"
#include "hostd/api_routes.h"

namespace pgfleet::hostd::routes {
namespace {

using nlohmann::json;

constexpr size_t kMaxEntries = 10000;
constexpr size_t kFileChunk = 64 * 1024;

// "/etc/hostname" -> "etc/hostname" (relative to the sandbox's root). Throws
// SpecError naming the rule for what may not be asked.
std::string SandboxRelative(const std::string& path) {
  if (path.size() > 4096) throw model::SpecError("path", "path must be at most 4096 bytes");
  if (path.find('\0') != std::string::npos) {
    throw model::SpecError("path", "path must not contain NUL bytes");
  }
  std::string out;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(pos, end - pos);
    if (part == "..") {
      throw model::SpecError("path",
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
    return net::ErrorResponse(res, 500, "cannot read directory " + shown + ": " + strerror(errno));
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

}  // namespace

void HandleFs(const Api& api, const httplib::Request& req, httplib::Response& res) {
  int64_t id;
  if (!ParseId(JobIdArg(req), &id)) {
    return net::ErrorResponse(res, 400, "job id must be a positive integer");
  }
  int attempt;
  std::string rel, shown = req.has_param("path") ? req.get_param_value("path") : "/";
  try {
    attempt = IntParam(req, "attempt");
    rel = SandboxRelative(shown);
  } catch (const model::SpecError& e) {
    return net::ErrorResponse(res, 400, e.what());
  }
  if (!AuthorizeJobRequest(api, req, res, net::TicketKind::kFs, id, &attempt)) return;
  if (!api.supervisor.RunsProcesses()) {
    return net::ErrorResponse(res, 404,
                              "no files for job " + std::to_string(id) +
                                  ": this host is simulated (driver sim), its jobs "
                                  "run no process");
  }
  const int want = attempt < 0 ? 0 : attempt;
  std::string log = api.supervisor.LogPath(id, want);
  if (log.empty()) {
    if (AnswerCollected(api, res, id, want)) return;
    return net::ErrorResponse(res, 404,
                              "job " + std::to_string(id) +
                                  (want > 0 ? " attempt " + std::to_string(want) : "") +
                                  " has no sandbox on this host");
  }
  std::string dir = log.substr(0, log.rfind('/'));
  if (want <= 0) attempt = std::stoi(dir.substr(dir.rfind('-') + 1));
  // Held while we read: the collector leaves the directory alone.
  std::shared_ptr<void> hold = api.collector ? api.collector->Hold(id, attempt) : nullptr;
  if (AnswerCollected(api, res, id, attempt)) return;
  std::string root = dir, sandbox = "attempt directory";
  auto info = api.supervisor.Attempt(id, attempt);
  if (api.supervisor.driver() == "container" && info && info->pid > 0 &&
      api.supervisor.Live(id, attempt)) {
    root = "/proc/" + std::to_string(info->pid) + "/root";
    sandbox = "container root";
  }
  Fd root_fd(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root_fd.fd < 0) {
    return net::ErrorResponse(res, 404,
                              "the sandbox of job " + std::to_string(id) + " attempt " +
                                  std::to_string(attempt) + " is gone (" + strerror(errno) + ")");
  }
  auto fd = std::make_shared<Fd>(OpenInRoot(root_fd.fd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  if (fd->fd < 0 && errno == ELOOP) {
    // The path names a symlink itself: say where it points, do not follow it.
    Fd link(OpenInRoot(root_fd.fd, rel, O_PATH | O_NOFOLLOW));
    char target[4096];
    ssize_t n = link.fd >= 0 ? readlinkat(link.fd, "", target, sizeof target) : -1;
    json out = {{"path", shown}, {"type", "symlink"}};
    if (n >= 0) out["target"] = util::SanitizeUtf8(std::string(target, static_cast<size_t>(n)));
    res.set_content(out.dump(), "application/json");
    return;
  }
  if (fd->fd < 0) {
    int err = errno;
    return net::ErrorResponse(
        res, err == ENOENT || err == ENOTDIR ? 404 : 403,
        "path: " + shown + ": " + strerror(err) + " (in the job's " + sandbox + ")");
  }
  res.set_header("X-Pgfleet-Sandbox", sandbox);
  struct stat st {};
  if (fstat(fd->fd, &st) != 0) return net::ErrorResponse(res, 500, strerror(errno));
  if (S_ISDIR(st.st_mode)) return ListDirectory(fd->fd, shown, res);
  if (!S_ISREG(st.st_mode)) {
    return net::ErrorResponse(res, 400,
                              "path: " + shown + " is a " + TypeOf(st.st_mode) +
                                  ", not a regular file or directory: only those are read");
  }
  // Bytes, a chunk at a time, up to the size it had when asked.
  const size_t size = static_cast<size_t>(st.st_size);
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

}  // namespace pgfleet::hostd::routes
