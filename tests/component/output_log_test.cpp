// A job's rotated output files (hostd/output/output_log.h), on a real filesystem:
// capped, contiguous, read by logical position across rotations, also while
// being written. (No database: here because it needs hostd's library.)

#include "hostd/output/output_log.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "test_support.h"

namespace pgfleet::testing {
namespace {

using hostd::output::ExtentOf;
using hostd::output::ReadAt;
using hostd::output::Segments;
using hostd::output::Tail;
using hostd::output::Writer;

// Byte number i of the output: depends on i, so a byte read at the wrong
// position is seen.
char ByteAt(uint64_t i) { return static_cast<char>((i * 131 + i / 4099) & 0xff); }

std::string Pattern(uint64_t from, size_t n) {
  std::string s(n, '\0');
  for (size_t k = 0; k < n; ++k) s[k] = ByteAt(from + k);
  return s;
}

constexpr uint64_t kMiB = 1 << 20;

TEST(OutputLog, KeepsAtMostMaxFilesOfMaxBytesAndTheNewestOutput) {
  TempDir dir;
  {
    Writer w(dir.path(), 3, kMiB);
    for (uint64_t at = 0; at < 10 * kMiB; at += 100000) {
      std::string chunk =
          Pattern(at, static_cast<size_t>(std::min<uint64_t>(100000, 10 * kMiB - at)));
      w.Write(chunk.data(), chunk.size());
    }
    EXPECT_EQ(10 * kMiB, w.written());
    EXPECT_EQ(0u, w.dropped());
  }
  auto segs = Segments(dir.path());
  ASSERT_EQ(3u, segs.size());
  uint64_t total = 0;
  for (size_t i = 0; i < segs.size(); ++i) {
    EXPECT_LE(segs[i].size, kMiB) << segs[i].path;
    if (i > 0) {
      EXPECT_EQ(segs[i - 1].start + segs[i - 1].size, segs[i].start) << "contiguous";
    }
    total += segs[i].size;
  }
  EXPECT_EQ(3 * kMiB, total);
  EXPECT_EQ(dir.path() + "/output.log", segs.back().path);
  auto extent = ExtentOf(dir.path());
  EXPECT_EQ(7 * kMiB, extent.first);
  EXPECT_EQ(10 * kMiB, extent.end);

  // Reading from 0 starts at the oldest byte kept and returns it all, in order.
  uint64_t pos = 0;
  std::string all;
  for (std::string chunk; !(chunk = ReadAt(dir.path(), &pos, 300000)).empty();) all += chunk;
  EXPECT_EQ(10 * kMiB, pos);
  ASSERT_EQ(3 * kMiB, all.size());
  EXPECT_TRUE(all == Pattern(7 * kMiB, 3 * kMiB));

  // The tail spans a file boundary.
  EXPECT_TRUE(Tail(dir.path(), static_cast<size_t>(kMiB + 10)) ==
              Pattern(9 * kMiB - 10, static_cast<size_t>(kMiB + 10)));
}

TEST(OutputLog, AReaderFollowingAWriterNeverGetsAByteAtTheWrongPosition) {
  TempDir dir;
  const uint64_t total = 40 * kMiB;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    Writer w(dir.path(), 3, 256 * 1024);
    std::mt19937 rng(7);
    for (uint64_t at = 0; at < total;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(1 + rng() % 70000, total - at));
      std::string chunk = Pattern(at, n);
      w.Write(chunk.data(), n);
      at += n;
    }
    done = true;
  });
  uint64_t pos = 0, got = 0, wrong = 0, skipped = 0;
  while (true) {
    uint64_t before = pos;
    std::string chunk = ReadAt(dir.path(), &pos, 65536);
    if (chunk.empty()) {
      if (done && pos >= ExtentOf(dir.path()).end) break;
      std::this_thread::yield();
      continue;
    }
    uint64_t at = pos - chunk.size();
    skipped += at - before;  // rotated away before we got there
    if (chunk != Pattern(at, chunk.size())) ++wrong;
    got += chunk.size();
  }
  writer.join();
  EXPECT_EQ(0u, wrong);
  EXPECT_EQ(total, pos);
  EXPECT_EQ(total, got + skipped);
  EXPECT_GT(got, 0u);
  EXPECT_LE(Segments(dir.path()).size(), 3u);
}

TEST(OutputLog, OutputThatCannotBeWrittenIsCountedNotFatal) {
  Writer w("/nonexistent/pgfleet-output-test", 5, kMiB);
  std::string data(1000, 'x');
  w.Write(data.data(), data.size());
  EXPECT_EQ(1000u, w.dropped());
  EXPECT_EQ(1000u, w.written());
  EXPECT_TRUE(Segments("/nonexistent/pgfleet-output-test").empty());
}

}  // namespace
}  // namespace pgfleet::testing
