#include "core/hostapi/hostapi.h"

#include <cctype>
#include <climits>
#include <nlohmann/json.hpp>

#include "core/model/json_limits.h"

namespace pgfleet::hostapi {

using nlohmann::json;

namespace {
std::string JobBase(int64_t job) { return std::string(kJobsPath) + "/" + std::to_string(job); }
}  // namespace

std::string JobPath(int64_t job) { return JobBase(job); }

std::string StopPath(int64_t job, int attempt, bool force) {
  return JobBase(job) + "/stop?attempt=" + std::to_string(attempt) + (force ? "&force=1" : "");
}

std::string LogsPath(int64_t job, int attempt) {
  return JobBase(job) + "/logs?attempt=" + std::to_string(attempt);
}

std::string FsPath(int64_t job, const std::string& path, int attempt) {
  return JobBase(job) + "/fs?path=" + UrlEncode(path) +
         (attempt > 0 ? "&attempt=" + std::to_string(attempt) : "");
}

std::string ExecPath(int64_t job) { return JobBase(job) + "/exec?"; }

std::string ExecStdinPath(int64_t job) { return JobBase(job) + "/exec/stdin"; }

std::string UrlEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::vector<std::string> EncodeDispatch(const std::vector<OutgoingJob>& jobs, size_t max_bytes,
                                        std::vector<size_t>* first) {
  static const std::string kHead = R"({"jobs":[)", kTail = "]}";
  std::vector<std::string> bodies;
  first->clear();
  std::string body;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const OutgoingJob& d = jobs[i];
    // Built as text: the spec is already JSON; the uid and ticket are quoted
    // by the JSON library.
    std::string item = R"({"job":)" + std::to_string(d.job) + R"(,"attempt":)" +
                       std::to_string(d.attempt) + R"(,"spec":)";
    item.append(d.spec_json);
    if (!d.uid.empty()) item += R"(,"uid":)" + json(d.uid).dump();
    if (!d.ticket.empty()) item += R"(,"ticket":)" + json(d.ticket).dump();
    item += '}';
    bool open = !body.empty();
    if (open && body.size() + 1 + item.size() + kTail.size() > max_bytes) {
      bodies.push_back(body + kTail);
      body.clear();
      open = false;
    }
    if (!open) {
      first->push_back(i);
      body = kHead;
    } else {
      body += ',';
    }
    body += item;
  }
  if (!body.empty()) bodies.push_back(body + kTail);
  return bodies;
}

std::vector<IncomingJob> DecodeDispatch(const std::string& body) {
  json j;
  try {
    j = model::ParseBoundedJson(body, "body");
  } catch (const model::JsonError& e) {
    throw model::SpecError("body", e.what());
  }
  if (!j.is_object() || !j.contains("jobs") || !j["jobs"].is_array()) {
    throw model::SpecError("jobs", "body must be an object with a \"jobs\" array");
  }
  std::vector<IncomingJob> items;
  size_t i = 0;
  for (const auto& e : j["jobs"]) {
    std::string at = "jobs[" + std::to_string(i++) + "]";
    if (!e.is_object()) throw model::SpecError(at, at + " must be an object");
    if (!e.contains("job") || !e["job"].is_number_integer() || e["job"].get<int64_t>() <= 0) {
      throw model::SpecError(at + ".job", at + ".job must be an integer > 0");
    }
    if (!e.contains("attempt") || !e["attempt"].is_number_integer() ||
        e["attempt"].get<int64_t>() <= 0 || e["attempt"].get<int64_t>() > INT32_MAX) {
      throw model::SpecError(at + ".attempt", at + ".attempt must be an integer > 0");
    }
    if (!e.contains("spec")) throw model::SpecError(at + ".spec", at + ".spec is required");
    std::string uid;
    if (e.contains("uid") && !e["uid"].is_null()) {
      if (!e["uid"].is_string() || e["uid"].get<std::string>().size() > 64) {
        throw model::SpecError(at + ".uid", at + ".uid must be a string of at most 64 characters");
      }
      uid = e["uid"].get<std::string>();
    }
    IncomingJob item;
    item.job = e["job"].get<int64_t>();
    item.attempt = static_cast<int>(e["attempt"].get<int64_t>());
    // An empty ticket is no ticket (EncodeDispatch leaves one out).
    if (!e.contains("ticket") || !e["ticket"].is_string() ||
        e["ticket"].get_ref<const std::string&>().empty()) {
      throw model::SpecError(at + ".ticket", at + ".ticket is required: a string the scheduler "
                                                  "signs for this host, job and attempt");
    }
    item.ticket = e["ticket"].get<std::string>();
    try {
      item.spec = model::ParseJobSpec(e["spec"]);
      item.spec.uid = uid;
    } catch (const model::SpecError& err) {
      item.refused = std::string("invalid job spec: ") + err.what();
    }
    items.push_back(std::move(item));
  }
  return items;
}

}  // namespace pgfleet::hostapi
