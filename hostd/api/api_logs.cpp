// GET /v1/jobs/{id}/logs: an attempt's output, across its rotated files
// (output_log.h), by logical position.

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "core/model/job_spec.h"
#include "core/util/text.h"
#include "hostd/api/api_routes.h"
#include "hostd/output/output_log.h"

namespace pgfleet::hostd::routes {
namespace {

// Output is read and sent 64 KiB at a time, from files that may hold many
// GB: memory per request stays bounded whatever the output's size.
constexpr size_t kLogChunk = 64 * 1024;
// tail=N: at most this many lines, found within this many bytes from the end.
constexpr int kMaxTailLines = 100000;
constexpr uint64_t kMaxTailScan = 64ull << 20;

// Exactly the bytes [begin, end) of the output (fewer if rotated away meanwhile).
std::string ReadRange(const std::string& dir, uint64_t begin, uint64_t end) {
  std::string out;
  uint64_t pos = begin;
  while (pos < end) {
    uint64_t at = pos;
    std::string chunk = output::ReadAt(dir, &pos, static_cast<size_t>(end - pos));
    if (chunk.empty() || at != pos - chunk.size()) break;  // ran out, or skipped ahead
    out += chunk;
  }
  return out;
}

// Where the last `lines` lines of the output up to `extent.end` begin (a final
// newline ends the last line rather than starting another). Reads backwards
// a chunk at a time; gives up kMaxTailScan bytes before the end (lines that
// long are cut there) or at the oldest byte kept.
uint64_t TailOffset(const std::string& dir, output::Extent extent, int lines) {
  if (lines == 0) return extent.end;
  const uint64_t floor =
      std::max<uint64_t>(extent.first, extent.end > kMaxTailScan ? extent.end - kMaxTailScan : 0);
  uint64_t end = extent.end;
  int seen = 0;
  bool last_byte = true;  // the output's final byte: a newline there ends, not starts, a line
  while (end > floor) {
    uint64_t begin = end > floor + kLogChunk ? end - kLogChunk : floor;
    std::string chunk = ReadRange(dir, begin, end);
    if (chunk.size() != end - begin) break;
    for (size_t i = chunk.size(); i-- > 0;) {
      if (chunk[i] == '\n' && !last_byte && ++seen == lines) return begin + i + 1;
      last_byte = false;
    }
    end = begin;
  }
  return floor;
}

// Streams the attempt's output from `offset`: up to `end` (where it ended
// when asked), or with `follow`, on as it grows until the attempt has ended
// and everything is sent (or the client goes away). `hold` keeps the
// attempt's directory from being collected meanwhile.
void StreamLog(const Api& api, const httplib::Request& req, httplib::Response& res, int64_t id,
               int attempt, std::string dir, uint64_t offset, uint64_t end, bool follow,
               std::shared_ptr<void> hold) {
  auto pos = std::make_shared<uint64_t>(offset);
  Supervisor& supervisor = api.supervisor;
  // A long stream is an answer in progress, not a slow request.
  std::function<void()> touch = api.guard ? api.guard->Toucher(req) : [] {};
  res.set_chunked_content_provider("text/plain", [&supervisor, id, attempt, dir, pos, end, follow,
                                                  touch, hold](size_t, httplib::DataSink& sink) {
    touch();
    for (int waited = 0; waited < 50; ++waited) {
      bool live = follow && supervisor.Live(id, attempt);
      size_t want =
          follow ? kLogChunk
                 : static_cast<size_t>(std::min<uint64_t>(kLogChunk, end > *pos ? end - *pos : 0));
      std::string chunk = output::ReadAt(dir, pos.get(), want);
      if (!chunk.empty()) return sink.write(chunk.data(), chunk.size());
      if (!live) {
        sink.done();
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return sink.is_writable();
  });
}

// The query of GET .../logs.
struct LogQuery {
  int attempt = -1, tail = -1;
  bool follow = false;
  int64_t offset = -1;  // resuming: the position after the last byte the client has
};

LogQuery ParseLogQuery(const httplib::Request& req) {
  LogQuery q;
  q.attempt = IntParam(req, "attempt");
  q.tail = IntParam(req, "tail");
  q.follow = IntParam(req, "follow") > 0;
  if (req.has_param("offset")) {
    // Resuming a stream that broke off: X-Log-Offset of its first answer
    // plus what it got.
    const std::string v = req.get_param_value("offset");
    if (v == "0") {
      q.offset = 0;
    } else if (!ParseId(v, &q.offset)) {
      BadParam("offset", "offset must be a non-negative integer, in bytes (got \"" +
                             v.substr(0, 20) + "\")");
    }
    if (q.tail >= 0) BadParam("offset", "offset and tail exclude each other");
  }
  if (q.tail > kMaxTailLines) {
    BadParam("tail", "tail must be at most " + std::to_string(kMaxTailLines) + " lines (got " +
                         std::to_string(q.tail) + ")");
  }
  return q;
}

}  // namespace

void HandleLogs(const Api& api, const httplib::Request& req, httplib::Response& res) {
  const int64_t id = JobIdOf(req);
  LogQuery q = ParseLogQuery(req);
  // A log ticket from pgfleet.log_ticket: for this job (and attempt, if given).
  AuthorizeJobRequest(api, req, net::TicketKind::kLogs, id, &q.attempt);
  const std::string job = "no logs for job " + std::to_string(id);
  if (api.supervisor.LogPath(id, q.attempt < 0 ? 0 : q.attempt).empty()) RefuseIfSimulated(api, job);
  HeldAttempt held = HoldAttemptDir(api, id, q.attempt, job + " on this host");
  output::Extent extent = output::ExtentOf(held.dir);
  uint64_t start =
      q.offset >= 0 ? std::clamp<uint64_t>(static_cast<uint64_t>(q.offset), extent.first, extent.end)
      : q.tail < 0  ? extent.first
                    : TailOffset(held.dir, extent, q.tail);
  // Where this answer's first byte is in the whole output: a client resumes
  // at this plus what it received. Earlier output was rotated away when
  // X-Log-First is above 0.
  res.set_header("X-Log-Offset", std::to_string(start));
  res.set_header("X-Log-First", std::to_string(extent.first));
  StreamLog(api, req, res, id, held.attempt, held.dir, start, extent.end, q.follow,
            std::move(held.hold));
}

}  // namespace pgfleet::hostd::routes
