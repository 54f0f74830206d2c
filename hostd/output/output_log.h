#pragma once
// A job's output on disk: rotated files in its attempt directory, capped at
// max_files x max_file_bytes, written by the job's shim from a pipe (the job
// never holds a file it could grow without bound), read by hostd's log API.
//
//   output.log             the newest output (the current file)
//   output.log.<offset>    older output: <offset> is the position in the
//                          whole output (bytes since the job started) of
//                          the file's first byte, 20 digits, so names sort
//                          in order; at most max_files - 1 of them
//
// Positions are logical: byte N of the output keeps number N across
// rotations, so a reader that resumes at N (pgfleet logs -f after a dropped
// connection) continues where it was, and a position that was rotated away
// reads from the oldest byte still kept.
//
// Rotation (the writer only): the full current file is linked under its
// rotated name, a fresh file is renamed over output.log (so output.log
// always exists), then the oldest rotated files beyond the cap are removed.
// A rotated file never changes again. Readers take a snapshot of the files
// with their inodes and check the inode of what they open, retrying when a
// rotation got in between.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pgfleet::hostd::output {

inline constexpr const char* kCurrent = "output.log";

// Appends output to `dir`'s files, rotating at max_file_bytes. Not
// thread-safe (the shim's one copier thread owns it). Never throws: a write
// that fails (a full disk) drops that output and counts it.
class Writer {
 public:
  Writer(std::string dir, int max_files, uint64_t max_file_bytes);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  void Write(const char* data, size_t size);
  uint64_t written() const { return start_ + current_size_; }  // logical end
  uint64_t dropped() const { return dropped_; }                // bytes lost to write errors

 private:
  void Rotate();
  void Prune();
  std::string dir_;
  int max_files_;
  uint64_t max_file_bytes_;
  int fd_ = -1;
  uint64_t start_ = 0;  // logical position of the current file's first byte
  uint64_t current_size_ = 0;
  uint64_t dropped_ = 0;
};

// The files of one attempt's output, oldest first, the current file last.
struct Segment {
  std::string path;
  uint64_t start = 0;  // logical position of its first byte
  uint64_t size = 0;
  uint64_t inode = 0;
};
std::vector<Segment> Segments(const std::string& dir);

// The logical range [first, end) still on disk: first > 0 when rotation
// removed the oldest output.
struct Extent {
  uint64_t first = 0;
  uint64_t end = 0;
};
Extent ExtentOf(const std::string& dir);

// Reads up to max_bytes from logical position *pos (moved up to the oldest
// byte kept when it was rotated away), not past one file's end; advances
// *pos by what it returns. "" at the end of the output.
std::string ReadAt(const std::string& dir, uint64_t* pos, size_t max_bytes);

// The last max_bytes of the output (fewer if there are fewer), across files.
std::string Tail(const std::string& dir, size_t max_bytes);

// Whether the attempt directory has any output file at all.
bool Exists(const std::string& dir);

}  // namespace pgfleet::hostd::output
