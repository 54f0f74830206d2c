#include "hostd/health/health_prober.h"

#include <string>

#include "core/util/text.h"
#include "hostd/drivers/container/container.h"
#include "hostd/exec/exec_run.h"

namespace pgfleet::hostd::health {

std::string BoundOutput(const std::string& raw) {
  std::string s = util::SanitizeUtf8(raw.substr(0, model::kMaxHealthOutputBytes));
  size_t end = s.find_last_not_of(" \t\r\n");
  s.resize(end == std::string::npos ? 0 : end + 1);
  s.erase(0, std::min(s.size(), s.find_first_not_of(" \t\r\n")));
  if (s.size() > model::kMaxHealthOutputBytes) {
    size_t cut = model::kMaxHealthOutputBytes;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
    s.resize(cut);
  }
  return s;
}

ProbeResult JobProber::Probe(const HealthTarget& target) {
  if (target.check.type == model::HealthCheckType::kCommand) return Command(target);
  return ProbeNetwork(target.check, target.pid);
}

ProbeResult JobProber::Command(const HealthTarget& target) {
  exec::ExecPlan plan;
  plan.argv_store = target.check.command;
  if (target.pid <= 0 ||
      !exec::PlanInJob(target.pid, own_root_,
                       own_root_ ? JobCgroupProcsFiles(host_id_, target.job_id, target.attempt)
                                 : std::vector<std::string>{},
                       &plan)) {
    return {false, "the job's process is gone"};
  }
  const int timeout_ms = target.check.timeout_seconds * 1000;
  exec::BoundedRun run = exec::RunBounded(plan, timeout_ms, model::kMaxHealthOutputBytes);
  ProbeResult r;
  if (run.timed_out) {
    r.output = BoundOutput("timed out after " + std::to_string(target.check.timeout_seconds) + "s" +
                           (run.output.empty() ? "" : ": " + run.output));
    return r;
  }
  r.passed = run.exit_code == 0;
  std::string text = !run.failure.empty() ? run.failure : run.output;
  if (!r.passed && text.empty()) text = "exit code " + std::to_string(run.exit_code);
  r.output = BoundOutput(text);
  return r;
}

}  // namespace pgfleet::hostd::health
