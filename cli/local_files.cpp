#include "cli/local_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "cli/command.h"
#include "core/model/job_spec.h"

namespace pgfleet::cli {

void AddLocalFile(const std::string& word, model::JobFiles* files) {
  const std::string flag = "--file " + word + ": ";
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t colon = word.find(':', start);
    parts.push_back(word.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() > 3 || parts[0].empty()) {
    throw UsageError(flag + "expected LOCAL[:PATH[:MODE]] (a local file, then where it goes in "
                            "the job's work dir, then its octal mode)");
  }
  const std::string& local = parts[0];
  int fd = open(local.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError(flag + "cannot open " + local + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw UsageError(flag + local + " is not a regular file");
  }
  if (static_cast<size_t>(st.st_size) > model::kMaxFilesBytes) {
    close(fd);
    throw UsageError(flag + "files must hold at most 1 MiB in all (" + local + " has " +
                     std::to_string(st.st_size) + " bytes)");
  }
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  bytes.resize(got);

  std::string path = parts.size() > 1 && !parts[1].empty() ? parts[1] : local;
  if (parts.size() < 2 || parts[1].empty()) path = path.substr(path.rfind('/') + 1);
  model::JobFile f;
  f.mode = (st.st_mode & S_IXUSR) ? 0755 : model::kDefaultFileMode;
  if (model::IsFileText(bytes)) {
    f.content = std::move(bytes);
  } else {
    f.content = model::Base64(bytes);
    f.base64 = true;
  }
  nlohmann::json one = {{path, model::ToJson(model::JobFiles{{path, f}})[path]}};
  if (parts.size() > 2) one[path]["mode"] = parts[2];
  try {
    auto parsed = model::ParseJobFiles(one);
    if (files->count(path)) throw UsageError(flag + "path " + path + " is given twice");
    files->insert(parsed.begin(), parsed.end());
    model::ValidateJobFiles(*files);
  } catch (const model::SpecError& e) {
    throw UsageError(flag + e.what());
  }
}

}  // namespace pgfleet::cli
