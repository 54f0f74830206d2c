#include "hostd/output/output_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace pgfleet::hostd::output {
namespace {

constexpr size_t kDigits = 20;  // of a rotated file's offset: any uint64_t

std::string RotatedName(uint64_t start) {
  char name[64];
  std::snprintf(name, sizeof name, "%s.%020" PRIu64, kCurrent, start);
  return name;
}

// "output.log.<20 digits>" -> its offset.
bool ParseRotated(const char* name, uint64_t* start) {
  const size_t prefix = std::strlen(kCurrent);
  if (std::strncmp(name, kCurrent, prefix) != 0 || name[prefix] != '.') return false;
  const char* digits = name + prefix + 1;
  if (std::strlen(digits) != kDigits) return false;
  uint64_t v = 0;
  for (const char* p = digits; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + static_cast<uint64_t>(*p - '0');
  }
  *start = v;
  return true;
}

// The rotated files, oldest first (not stat'ed).
std::vector<Segment> RotatedFiles(const std::string& dir) {
  std::vector<Segment> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    uint64_t start;
    if (ParseRotated(e->d_name, &start)) out.push_back({dir + "/" + e->d_name, start, 0, 0});
  }
  closedir(d);
  std::sort(out.begin(), out.end(),
            [](const Segment& a, const Segment& b) { return a.start < b.start; });
  return out;
}

void WriteAll(int fd, const char* data, size_t size, uint64_t* dropped) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *dropped += size;
      return;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

Writer::Writer(std::string dir, int max_files, uint64_t max_file_bytes)
    : dir_(std::move(dir)),
      max_files_(std::max(max_files, 2)),
      max_file_bytes_(std::max<uint64_t>(max_file_bytes, 1)) {
  auto segs = Segments(dir_);  // normally none yet
  if (!segs.empty()) {
    start_ = segs.back().start;
    current_size_ = segs.back().size;
  }
  // Never through a link: the attempt dir is root's alone, and this holds
  // even if that ever changed.
  fd_ = open((dir_ + "/" + kCurrent).c_str(),
             O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
}

Writer::~Writer() {
  if (fd_ >= 0) close(fd_);
}

void Writer::Write(const char* data, size_t size) {
  while (size > 0) {
    if (current_size_ >= max_file_bytes_) Rotate();
    size_t n = static_cast<size_t>(std::min<uint64_t>(size, max_file_bytes_ - current_size_));
    if (fd_ < 0) {
      dropped_ += n;
    } else {
      WriteAll(fd_, data, n, &dropped_);
    }
    current_size_ += n;  // logical positions advance even over dropped bytes
    data += n;
    size -= n;
  }
}

void Writer::Rotate() {
  const std::string current = dir_ + "/" + kCurrent;
  const std::string rotated = dir_ + "/" + RotatedName(start_);
  const std::string fresh = current + ".new";
  bool linked = link(current.c_str(), rotated.c_str()) == 0;
  // A new file of ours: whatever was at that name (a leftover, or a link)
  // goes first, and O_EXCL | O_NOFOLLOW make sure nothing else is opened.
  if (linked) unlink(fresh.c_str());
  int fd = linked ? open(fresh.c_str(),
                         O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644)
                  : -1;
  if (fd >= 0 && rename(fresh.c_str(), current.c_str()) != 0) {
    close(fd);
    unlink(fresh.c_str());
    fd = -1;
  }
  if (fd < 0) {
    // Cannot rotate (no inode left, say): drop the current file's content
    // rather than grow past the cap.
    if (linked) unlink(rotated.c_str());
    if (fd_ >= 0 && ftruncate(fd_, 0) != 0) {
      close(fd_);
      fd_ = -1;
    }
  } else {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }
  start_ += current_size_;
  current_size_ = 0;
  Prune();
}

void Writer::Prune() {
  auto rotated = RotatedFiles(dir_);
  size_t keep = static_cast<size_t>(max_files_ - 1);
  for (size_t i = 0; i + keep < rotated.size(); ++i) unlink(rotated[i].path.c_str());
}

std::vector<Segment> Segments(const std::string& dir) {
  std::vector<Segment> segs;
  Segment cur{dir + "/" + kCurrent, 0, 0, 0};
  // The current file's inode before and after listing the rotated ones: a
  // rotation that completed in between put a file in place whose start the
  // listing cannot give (its predecessor is missing from it), so list again.
  auto current_inode = [&cur](struct stat* st) -> uint64_t {
    if (stat(cur.path.c_str(), st) == 0) return static_cast<uint64_t>(st->st_ino);
    *st = {};
    return 0;
  };
  struct stat st {};
  bool settled = false;
  for (int attempt = 0; attempt < 5 && !settled; ++attempt) {
    segs.clear();
    uint64_t before = current_inode(&st);
    for (auto& s : RotatedFiles(dir)) {
      struct stat rs {};
      if (stat(s.path.c_str(), &rs) != 0) continue;  // pruned meanwhile
      s.size = static_cast<uint64_t>(rs.st_size);
      s.inode = static_cast<uint64_t>(rs.st_ino);
      segs.push_back(std::move(s));
    }
    settled = current_inode(&st) == before;
  }
  if (st.st_ino == 0) {
    if (segs.empty()) return segs;  // no output at all
  } else {
    cur.size = static_cast<uint64_t>(st.st_size);
    cur.inode = static_cast<uint64_t>(st.st_ino);
  }
  if (!segs.empty()) {
    cur.start = segs.back().start + segs.back().size;
    // Still rotating after every try: read nothing new from the current
    // file this time, as mid-rotation below.
    if (cur.inode == segs.back().inode || !settled) {
      // Mid-rotation: output.log is still the file just linked away; the
      // new current file, empty, is not in place yet.
      cur.size = 0;
      cur.inode = 0;
    }
  }
  segs.push_back(std::move(cur));
  return segs;
}

Extent ExtentOf(const std::string& dir) {
  auto segs = Segments(dir);
  if (segs.empty()) return {};
  return {segs.front().start, segs.back().start + segs.back().size};
}

namespace {
// Whether `segs` has the file of that inode starting at `start`.
bool PlacedAt(const std::vector<Segment>& segs, uint64_t inode, uint64_t start) {
  for (const auto& s : segs) {
    if (s.inode == inode) return s.start == start;
  }
  return false;
}
}  // namespace

std::string ReadAt(const std::string& dir, uint64_t* pos, size_t max_bytes) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto segs = Segments(dir);
    if (segs.empty() || max_bytes == 0) return "";
    if (*pos < segs.front().start) *pos = segs.front().start;  // rotated away
    size_t i = segs.size() - 1;
    while (i > 0 && segs[i].start > *pos) --i;
    const Segment& s = segs[i];
    const bool current = i + 1 == segs.size();
    if (s.inode == 0) return "";  // the current file is being replaced: nothing new yet
    int fd = open(s.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;  // rotated or pruned since the snapshot
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != s.inode) {
      close(fd);
      continue;
    }
    uint64_t offset = *pos - s.start;
    // A rotated file is final; the current one may have grown since.
    uint64_t limit = current ? static_cast<uint64_t>(st.st_size) : s.size;
    if (offset >= limit) {
      close(fd);
      if (current) return "";
      continue;  // at a rotated file's end: the next file (re-listed) follows
    }
    std::string out(static_cast<size_t>(std::min<uint64_t>(max_bytes, limit - offset)), '\0');
    ssize_t n = pread(fd, out.data(), out.size(), static_cast<off_t>(offset));
    close(fd);
    if (n <= 0) return "";
    // output.log is a new file after every rotation, and a file made after
    // the one snapshotted was pruned can get its inode number: what was read
    // is that file's only if a fresh snapshot still places the inode at the
    // same start. (A rotated file's name, its start, is never reused.)
    if (current && !PlacedAt(Segments(dir), s.inode, s.start)) continue;
    out.resize(static_cast<size_t>(n));
    *pos += static_cast<uint64_t>(n);
    return out;
  }
  return "";
}

std::string Tail(const std::string& dir, size_t max_bytes) {
  Extent e = ExtentOf(dir);
  uint64_t pos = e.end - e.first > max_bytes ? e.end - max_bytes : e.first;
  std::string out;
  while (out.size() < max_bytes) {
    std::string chunk = ReadAt(dir, &pos, max_bytes - out.size());
    if (chunk.empty()) break;
    out += chunk;
  }
  return out;
}

bool Exists(const std::string& dir) { return !Segments(dir).empty(); }

}  // namespace pgfleet::hostd::output
