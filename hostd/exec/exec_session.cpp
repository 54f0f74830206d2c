#include "hostd/exec/exec_session.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include "core/util/mutex.h"
#include "hostd/exec/exec_helper.h"

namespace pgfleet::hostd::exec {

Session::~Session() {
  if (!reaped && helper > 0) {
    kill(helper, SIGKILL);  // the client went away: the command goes too (PDEATHSIG)
    while (waitpid(helper, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  for (int fd : {in, out, err, fail, tty, wake}) {
    if (fd >= 0) close(fd);
  }
}

std::string StreamedSessions::Add(int64_t job, const std::shared_ptr<Session>& s) {
  unsigned char raw[16];
  if (RAND_bytes(raw, sizeof raw) != 1) throw std::runtime_error("no random bytes for a session");
  static const char* hex = "0123456789abcdef";
  std::string secret;
  for (unsigned char c : raw) {
    secret += hex[c >> 4];
    secret += hex[c & 15];
  }
  util::MutexLock lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->second.session.expired() ? entries_.erase(it) : std::next(it);
  }
  uint64_t index = ++next_;
  entries_[index] = {job, secret, s};
  return std::to_string(index) + "." + secret;
}

std::shared_ptr<Session> StreamedSessions::Find(int64_t job, const std::string& name) {
  size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 19) return nullptr;
  uint64_t index = 0;
  for (size_t i = 0; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return nullptr;
    index = index * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  std::string secret = name.substr(dot + 1);
  util::MutexLock lock(mu_);
  auto it = entries_.find(index);
  if (it == entries_.end() || it->second.job != job || secret.size() != it->second.secret.size() ||
      CRYPTO_memcmp(secret.data(), it->second.secret.data(), secret.size()) != 0) {
    return nullptr;
  }
  return it->second.session.lock();
}

StreamedSessions& Streamed() {
  static StreamedSessions sessions;
  return sessions;
}

void PutStdin(Session& s, short revents) {
  util::MutexLock lock(s.mu);
  if (s.in < 0) return;
  if (!s.stdin_left.empty() && (revents & (POLLOUT | POLLERR | POLLHUP))) {
    ssize_t put = write(s.in, s.stdin_left.data(), s.stdin_left.size());
    if (put > 0) s.stdin_left.erase(0, static_cast<size_t>(put));
    if (put < 0 && errno != EAGAIN && errno != EINTR && s.tty < 0) {
      s.stdin_left.clear();  // the command closed its stdin
      s.stdin_eof = true;
    }
  } else if (revents & (POLLERR | POLLHUP)) {
    s.stdin_eof = true;
  }
  if (s.stdin_left.empty() && s.stdin_eof && s.tty < 0) {
    close(s.in);  // EOF on its stdin
    s.in = -1;
  }
}

namespace {

std::string Frame(char kind, const char* data, size_t n) {
  std::string f = std::string(1, kind) + " " + std::to_string(n) + "\n";
  f.append(data, n);
  return f;
}

}  // namespace

bool Pump(Session& s, httplib::DataSink& sink) {
  for (int round = 0; round < 20; ++round) {
    if (s.out < 0 && s.err < 0) {
      int status = 0;
      while (waitpid(s.helper, &status, 0) < 0 && errno == EINTR) {
      }
      s.reaped = true;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      std::string why = HelperFailure(s.fail);
      if (!why.empty()) {
        std::string f = Frame('e', why.data(), why.size());
        if (!sink.write(f.data(), f.size())) return false;
      }
      std::string end = "x " + std::to_string(code) + "\n";
      if (!sink.write(end.data(), end.size())) return false;
      sink.done();
      return true;
    }
    bool to_send;
    {
      util::MutexLock lock(s.mu);
      to_send = !s.stdin_left.empty();
    }
    pollfd fds[4] = {{s.out, POLLIN, 0},
                     {s.err, POLLIN, 0},
                     {s.in, static_cast<short>(to_send ? POLLOUT : 0), 0},
                     {s.wake, POLLIN, 0}};
    int n = poll(fds, 4, 50);
    if (n < 0 && errno != EINTR) return false;
    if (fds[3].revents & POLLIN) {
      uint64_t ignored;
      ssize_t r = read(s.wake, &ignored, sizeof ignored);
      (void)r;
    }
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? s.out : s.err;
      if (fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t got = read(fd, buf, sizeof buf);
      if (got > 0) {
        std::string f = Frame(i == 0 ? 'o' : 'e', buf, static_cast<size_t>(got));
        if (!sink.write(f.data(), f.size())) return false;
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(fd);
        fd = -1;
      }
    }
    if (s.in >= 0) PutStdin(s, fds[2].revents);
  }
  return sink.is_writable();
}

bool MakeStreams(bool tty, const winsize& size, Session* s, int child_end[3], std::string* why) {
  if (tty) {
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    int other = -1;
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0 ||
        (other = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
      *why = std::string("terminal: ") + strerror(errno);
      if (master >= 0) close(master);
      return false;
    }
    ioctl(master, TIOCSWINSZ, &size);
    s->tty = master;  // the Session closes it, and in and out
    s->in = fcntl(master, F_DUPFD_CLOEXEC, 0);
    s->out = fcntl(master, F_DUPFD_CLOEXEC, 0);
    if (s->in < 0 || s->out < 0) {
      *why = std::string("terminal: ") + strerror(errno);
      close(other);
      return false;
    }
    child_end[0] = child_end[1] = child_end[2] = other;
    return true;
  }
  int pipes[3][2];
  for (int i = 0; i < 3; ++i) {
    if (pipe2(pipes[i], O_CLOEXEC) != 0) {
      *why = std::string("pipe: ") + strerror(errno);
      for (int j = 0; j < i; ++j) {
        close(pipes[j][0]);
        close(pipes[j][1]);
      }
      return false;
    }
  }
  s->in = pipes[0][1];
  s->out = pipes[1][0];
  s->err = pipes[2][0];
  child_end[0] = pipes[0][0];
  child_end[1] = pipes[1][1];
  child_end[2] = pipes[2][1];
  return true;
}

void CloseChildEnds(const int child[3]) {
  for (int i = 0; i < 3; ++i) {
    if (child[i] < 0) continue;
    if ((i > 0 && child[i] == child[0]) || (i > 1 && child[i] == child[1])) continue;
    close(child[i]);
  }
}

}  // namespace pgfleet::hostd::exec
