#pragma once
// Job files (jobs.files, docs/files.md): small files a job carries, written
// by hostd into its work dir before it starts. The same rules as the
// database's domain pgfleet.spec_files (migration 0036), with the same
// words, so hostd refuses what the database would (it never trusts a spec
// blindly) and the CLI says so before anything is written.

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace pgfleet::model {

inline constexpr int kMaxFiles = 64;
inline constexpr size_t kMaxFilesBytes = 1 << 20;  // content bytes summed (decoded)
inline constexpr size_t kMaxFilePathBytes = 255;
inline constexpr int kDefaultFileMode = 0644;

struct JobFile {
  std::string content;  // as given: text, or base64 when `base64`
  bool base64 = false;
  int mode = kDefaultFileMode;  // 0..0777
};

// Path -> file.
using JobFiles = std::map<std::string, JobFile>;

// Parses the spec's "files" (null or missing: none) and checks every rule.
// Throws SpecError("files", ...) naming the rule and the path.
JobFiles ParseJobFiles(const nlohmann::json& j);
// Checks every rule of files already parsed (ParseJobFiles calls it).
void ValidateJobFiles(const JobFiles& files);
// The "files" of a spec: null when there are none.
nlohmann::json ToJson(const JobFiles& files);

// The bytes a file holds (its content, base64 decoded). Throws SpecError when
// base64 content is not base64.
std::string FileBytes(const JobFile& f);
// Standard base64 (with padding) of bytes.
std::string Base64(const std::string& bytes);

// Whether content may travel as text: valid UTF-8 without control
// characters but tab, newline and carriage return.
bool IsFileText(const std::string& content);

}  // namespace pgfleet::model
