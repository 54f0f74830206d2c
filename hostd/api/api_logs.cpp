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

}  // namespace

// 410 when the attempt's directory was collected (attempt 0: the job's
// latest collected attempt); false when it was not.
bool AnswerCollected(const Api& api, httplib::Response& res, int64_t id, int attempt) {
  if (!api.collector) return false;
  auto c = api.collector->Find(id, &attempt);
  if (!c) return false;
  net::ErrorResponse(res, 410,
                     "the log of job " + std::to_string(id) + " attempt " +
                         std::to_string(attempt) + " was collected at " +
                         util::IsoTime(c->collected) + " (the attempt ended at " +
                         util::IsoTime(c->ended) + "; hostd --gc-after, --gc-disk-percent)");
  return true;
}

void HandleLogs(const Api& api, const httplib::Request& req, httplib::Response& res) {
  int64_t id;
  if (!ParseId(JobIdArg(req), &id)) {
    return net::ErrorResponse(res, 400, "job id must be a positive integer");
  }
  int attempt, tail, follow;
  int64_t offset = -1;
  try {
    attempt = IntParam(req, "attempt");
    tail = IntParam(req, "tail");
    follow = IntParam(req, "follow");
    if (req.has_param("offset")) {
      // Resuming a stream that broke off: the position after the last byte
      // the client has (X-Log-Offset of its first answer plus what it got).
      const std::string v = req.get_param_value("offset");
      if (v == "0") {
        offset = 0;
      } else if (!ParseId(v, &offset)) {
        throw model::SpecError(
            "offset", "offset must be a non-negative integer, in bytes (got \"" + v + "\")");
      }
      if (tail >= 0) throw model::SpecError("offset", "offset and tail exclude each other");
    }
    if (tail > kMaxTailLines) {
      throw model::SpecError("tail", "tail must be at most " + std::to_string(kMaxTailLines) +
                                         " lines (got " + std::to_string(tail) + ")");
    }
  } catch (const model::SpecError& e) {
    return net::ErrorResponse(res, 400, e.what());
  }
  // A log ticket from pgfleet.log_ticket: for this job (and attempt, if given).
  if (!AuthorizeJobRequest(api, req, res, net::TicketKind::kLogs, id, &attempt)) return;
  std::string path = api.supervisor.LogPath(id, attempt < 0 ? 0 : attempt);
  if (path.empty() && !api.supervisor.RunsProcesses()) {
    return net::ErrorResponse(res, 404,
                              "no logs for job " + std::to_string(id) +
                                  ": this host is simulated (driver sim), its jobs run no process");
  }
  if (path.empty()) {
    if (AnswerCollected(api, res, id, attempt < 0 ? 0 : attempt)) return;
    return net::ErrorResponse(res, 404, "no logs for job " + std::to_string(id) + " on this host");
  }
  std::string dir = path.substr(0, path.rfind('/'));
  if (attempt <= 0) {
    // attempt from the directory name <job>-<attempt>
    attempt = std::stoi(dir.substr(dir.rfind('-') + 1));
  }
  // Held before looking again: the collector either sees the hold, or has
  // already recorded the attempt as collected.
  std::shared_ptr<void> hold = api.collector ? api.collector->Hold(id, attempt) : nullptr;
  if (AnswerCollected(api, res, id, attempt)) return;
  output::Extent extent = output::ExtentOf(dir);
  uint64_t start =
      offset >= 0 ? std::clamp<uint64_t>(static_cast<uint64_t>(offset), extent.first, extent.end)
      : tail < 0  ? extent.first
                  : TailOffset(dir, extent, tail);
  // Where this answer's first byte is in the whole output: a client resumes
  // at this plus what it received. Earlier output was rotated away when
  // X-Log-First is above 0.
  res.set_header("X-Log-Offset", std::to_string(start));
  res.set_header("X-Log-First", std::to_string(extent.first));
  StreamLog(api, req, res, id, attempt, dir, start, extent.end, follow > 0, std::move(hold));
}

}  // namespace pgfleet::hostd::routes
