// libFuzzer target: a dispatch body as it reaches hostd (POST /v1/jobs,
// core/hostapi/hostapi.h DecodeDispatch). Whatever the bytes, decoding
// never crashes and either names a field or yields jobs; jobs it yields,
// encoded again as a scheduler would and decoded, are the same jobs.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/hostapi/hostapi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pgfleet;
  std::string body(reinterpret_cast<const char*>(data), size);
  std::vector<hostapi::IncomingJob> jobs;
  try {
    jobs = hostapi::DecodeDispatch(body);
  } catch (const model::SpecError& e) {
    if (e.field().empty()) std::abort();  // a refusal always names its field
    return 0;
  }
  std::vector<std::string> specs;
  std::vector<hostapi::OutgoingJob> out;
  specs.reserve(jobs.size());
  for (const auto& j : jobs) {
    if (!j.refused.empty()) continue;  // refused specs are not sent again
    specs.push_back(model::ToJson(j.spec).dump());
  }
  size_t s = 0;
  for (const auto& j : jobs) {
    if (!j.refused.empty()) continue;
    out.push_back({j.job, j.attempt, specs[s++], j.spec.uid, j.ticket});
  }
  std::vector<size_t> first;
  auto bodies = hostapi::EncodeDispatch(out, 1 << 20, &first);
  size_t k = 0;
  for (const auto& b : bodies) {
    for (const auto& again : hostapi::DecodeDispatch(b)) {
      const auto& was = out.at(k++);
      if (again.job != was.job || again.attempt != was.attempt || again.ticket != was.ticket ||
          again.spec.uid != was.uid || !again.refused.empty() ||
          model::ToJson(again.spec).dump() != was.spec_json) {
        std::abort();  // the round trip changed a job
      }
    }
  }
  if (k != out.size()) std::abort();
  return 0;
}
