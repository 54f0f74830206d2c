#include "cli/ui/params.h"

#include <set>

#include "core/model/states.h"

namespace pgfleet::cli::ui {

void OnlyParams(const httplib::Request& req, std::initializer_list<const char*> allowed) {
  std::set<std::string> names(allowed.begin(), allowed.end());
  for (const auto& [name, value] : req.params) {
    if (!names.count(name)) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      std::string shown = name.size() > 40 ? name.substr(0, 40) + "..." : name;
      for (char& c : shown)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
      throw BadParam("unknown parameter \"" + shown + "\" (this route takes " +
                     (list.empty() ? std::string("none") : list) + ")");
    }
    if (req.params.count(name) > 1) throw BadParam(name + " given more than once");
  }
}

std::string TextParam(const httplib::Request& req, const char* name) {
  if (!req.has_param(name)) return "";
  std::string v = req.get_param_value(name);
  if (v.size() > kMaxParamLength)
    throw BadParam(std::string(name) + " must be at most " + std::to_string(kMaxParamLength) +
                   " bytes (got " + std::to_string(v.size()) + ")");
  for (char c : v) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      throw BadParam(std::string(name) + " must hold no control characters");
  }
  return v;
}

int64_t IntParam(const httplib::Request& req, const char* name, int64_t min, int64_t max,
                 int64_t fallback) {
  if (!req.has_param(name)) return fallback;
  std::string v = req.get_param_value(name);
  std::string rule = std::string(name) + " must be an integer from " + std::to_string(min) +
                     " to " + std::to_string(max);
  if (v.empty() || v.size() > 18) throw BadParam(rule);
  for (size_t i = 0; i < v.size(); ++i) {
    if (!(v[i] >= '0' && v[i] <= '9') && !(i == 0 && v[i] == '-' && v.size() > 1))
      throw BadParam(rule);
  }
  int64_t n = std::stoll(v);
  if (n < min || n > max) throw BadParam(rule + " (got " + v + ")");
  return n;
}

int64_t JobIdParam(const std::string& text) {
  const char* rule = "the job id must be a positive integer below 2^63";
  if (text.empty() || text.size() > 18) throw BadParam(rule);
  for (char c : text)
    if (c < '0' || c > '9') throw BadParam(rule);
  int64_t id = std::stoll(text);
  if (id <= 0) throw BadParam(rule);
  return id;
}

JobsQuery ParseJobsQuery(const httplib::Request& req) {
  OnlyParams(req, {"state", "formation", "host", "owner", "limit"});
  JobsQuery q;
  q.state = TextParam(req, "state");
  if (!q.state.empty() && !model::ParseJobState(q.state))
    throw BadParam(
        "state must be one of pending, assigned, running, succeeded, failed, cancelled");
  q.formation = TextParam(req, "formation");
  q.host = TextParam(req, "host");
  q.owner = TextParam(req, "owner");
  q.limit = static_cast<int>(IntParam(req, "limit", 1, 1000, 200));
  return q;
}

}  // namespace pgfleet::cli::ui
