#include "hostd/drivers/driver.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>


#include "core/model/constants.h"

#include "core/util/mutex.h"

namespace pgfleet::hostd {

std::vector<std::string> JobEnvironment(const RunRequest& req) {
  std::vector<std::string> env;
  for (const auto& [key, value] : req.spec.env) env.push_back(key + "=" + value);
  if (!req.spec.env.count("PATH")) env.push_back(std::string("PATH=") + kDefaultJobPath);
  env.push_back("PGFLEET_JOB_ID=" + std::to_string(req.job_id));
  env.push_back("PGFLEET_ATTEMPT=" + std::to_string(req.attempt));
  for (const auto& [key, value] : model::JobPortEnv(req.spec.ports, req.host_address)) {
    env.push_back(key + "=" + value);
  }
  return env;
}

int OpenJobOutput(const RunRequest& req, mode_t mode) {
  if (req.output_fd >= 0) return fcntl(req.output_fd, F_DUPFD_CLOEXEC, 3);
  int fd = open(req.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, mode);
  if (fd < 0 || fd >= 3) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);  // clear of the stdio slots it is dup'ed onto
  close(fd);
  return moved;
}

JobIdRange ParseJobIdRange(const std::string& text) {
  auto bad = [&text](const std::string& rule) {
    return std::invalid_argument("--job-ids must be START:COUNT with " + rule + " (got \"" + text +
                                 "\")");
  };
  const size_t colon = text.find(':');
  auto number = [&](const std::string& digits) -> unsigned long long {
    if (digits.empty() || digits.size() > 10 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      throw bad("START and COUNT in decimal");
    }
    return std::stoull(digits);
  };
  if (colon == std::string::npos) throw bad("START and COUNT in decimal");
  const unsigned long long start = number(text.substr(0, colon));
  const unsigned long long count = number(text.substr(colon + 1));
  if (start < 65536) throw bad("START at least 65536 (above the ids of host accounts)");
  if (count < static_cast<unsigned long long>(model::kJobNamespaceIds)) {
    throw bad("COUNT at least " + std::to_string(model::kJobNamespaceIds) +
              " (the ids of a job's user namespace)");
  }
  if (start + count - 1 > static_cast<unsigned long long>(model::kMaxJobUserId)) {
    throw bad("START + COUNT - 1 at most " + std::to_string(model::kMaxJobUserId));
  }
  return {static_cast<uint32_t>(start), static_cast<uint32_t>(count)};
}

std::string FormatJobIdRange(const JobIdRange& range) {
  return std::to_string(range.start) + ":" + std::to_string(range.count);
}

std::string JobIdRangeConflict(const JobIdRange& range) {
  // getpwent and getgrent walk one shared cursor each.
  static util::Mutex mu;
  util::MutexLock lock(mu);
  auto inside = [&range](unsigned long id) {
    return id >= range.start && id - range.start < range.count;
  };
  std::string found;
  setpwent();
  while (passwd* pw = getpwent()) {
    if (inside(pw->pw_uid) || inside(pw->pw_gid)) {
      found = "user " + std::string(pw->pw_name) + " (uid " + std::to_string(pw->pw_uid) +
              ", gid " + std::to_string(pw->pw_gid) + ")";
      break;
    }
  }
  endpwent();
  if (!found.empty()) return found;
  setgrent();
  while (group* gr = getgrent()) {
    if (inside(gr->gr_gid)) {
      found = "group " + std::string(gr->gr_name) + " (gid " + std::to_string(gr->gr_gid) + ")";
      break;
    }
  }
  endgrent();
  return found;
}

}  // namespace pgfleet::hostd
