#include "hostd/fence/lease.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace pgfleet::hostd {

namespace {
constexpr size_t kWidth = 20;  // digits; the line is always kWidth + 1 bytes
}

std::chrono::milliseconds SelfFenceAfter(std::chrono::milliseconds host_ttl) {
  return host_ttl - std::min(std::chrono::milliseconds(500), host_ttl / 4);
}

int64_t BootTimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

std::optional<int64_t> ReadLease(const std::string& data_dir) {
  int fd = open((data_dir + "/" + kLeaseFile).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[kWidth + 2] = {};
  ssize_t n;
  do {
    n = pread(fd, buf, kWidth + 1, 0);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n != static_cast<ssize_t>(kWidth + 1) || buf[kWidth] != '\n') return std::nullopt;
  char* end = nullptr;
  long long v = std::strtoll(buf, &end, 10);
  if (end != buf + kWidth || v <= 0) return std::nullopt;
  return v;
}

LeaseWriter::LeaseWriter(std::string data_dir) : path_(std::move(data_dir) + "/" + kLeaseFile) {}

LeaseWriter::~LeaseWriter() {
  if (fd_ >= 0) close(fd_);
}

bool LeaseWriter::Write(int64_t boottime_ns) {
  if (fd_ < 0) fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return false;
  char buf[kWidth + 2];
  std::snprintf(buf, sizeof buf, "%020lld\n", static_cast<long long>(boottime_ns));
  ssize_t n;
  do {
    n = pwrite(fd_, buf, kWidth + 1, 0);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(kWidth + 1);
}

}  // namespace pgfleet::hostd
