#pragma once
// --file LOCAL[:PATH[:MODE]] of `run`, `formation create` and `formation
// update`: a local file read into the spec's files (core/model/job_files.h,
// docs/files.md).

#include <string>

#include "core/model/job_files.h"

namespace pgfleet::cli {

// Reads the local file a --file word names into *files: at PATH (default:
// LOCAL's name), with octal MODE (default 0755 when LOCAL is executable by
// its owner, else 0644), as text when it is text, else base64. Throws
// UsageError naming --file and the rule (not a regular file, too big, a bad
// path or mode, a path given twice).
void AddLocalFile(const std::string& word, model::JobFiles* files);

}  // namespace pgfleet::cli
