#pragma once
// One command run by hostd's exec API (api_exec.cpp), from its start to its
// exit code: the pipes or terminal between hostd and the helper
// (exec_helper.h), the stdin that later requests bring (a streamed exec),
// and the pump that moves output into the HTTP answer as frames.

#include <httplib.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/util/mutex.h"

namespace pgfleet::hostd::exec {

// Bytes of stdin a session holds for a command that has not read them yet.
constexpr size_t kMaxStdinWaiting = 1 << 20;

// One running command: its helper, the pipes (or terminal) to it, what is
// left to send. The answer's thread (Pump) owns the descriptors; stdin
// requests add to `stdin_left` and wake it.
struct Session {
  pid_t helper = -1;
  int in = -1, out = -1, err = -1, fail = -1;
  int tty = -1;   // the terminal's master (for resizes; in and out are dups), or -1
  int wake = -1;  // eventfd: stdin arrived
  bool reaped = false;
  util::Mutex mu;
  std::string stdin_left GUARDED_BY(mu);
  bool stdin_eof GUARDED_BY(mu) = true;  // no more stdin will come
  ~Session();              // kills the helper if the answer ended first, closes the descriptors
};

// Sessions whose stdin comes in later requests, by a public index; the
// secret part of a session's name is compared in constant time.
class StreamedSessions {
 public:
  // The session's name, "<index>.<32 hex digits>".
  std::string Add(int64_t job, const std::shared_ptr<Session>& s);
  // The live session of that name for that job, or null.
  std::shared_ptr<Session> Find(int64_t job, const std::string& name);

 private:
  struct Entry {
    int64_t job = 0;
    std::string secret;
    std::weak_ptr<Session> session;
  };
  util::Mutex mu_;
  uint64_t next_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Entry> entries_ GUARDED_BY(mu_);
};

// The process's streamed sessions.
StreamedSessions& Streamed();

// Writes what stdin holds; closes the command's stdin once it ends (all sent
// and no more coming, or the command stopped reading). A terminal stays open.
void PutStdin(Session& s, short revents);

// Moves what is ready between the pipes and the answer, for up to ~1 s;
// ends the answer with the exit code once the command is done. False when
// the client is gone.
bool Pump(Session& s, httplib::DataSink& sink);

// The command's stdin and stdout/stderr: three pipes, or one new terminal of
// `size` (its master in s, its other side in child_end, the helper's ends).
// False with *why when they cannot be made (nothing left open).
bool MakeStreams(bool tty, const winsize& size, Session* s, int child_end[3], std::string* why);

// Closes the helper's ends once each (a terminal's are one descriptor three
// times: closing it again could close another thread's new descriptor).
void CloseChildEnds(const int child[3]);

}  // namespace pgfleet::hostd::exec
