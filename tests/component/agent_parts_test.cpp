// The agent's two parts other threads touch, alone: the fence watchdog
// (hostd/fence/watchdog.h) and the report queue (hostd/agent/report_queue.h).
// No database: the contacts a heartbeat would make are noted by hand.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "hostd/agent/report_queue.h"
#include "hostd/fence/lease.h"
#include "hostd/fence/watchdog.h"
#include "test_support.h"

namespace pgfleet::hostd {
namespace {

using namespace std::chrono_literals;

struct Fences {
  std::vector<std::string> fenced;
  int unfenced = 0;
  FenceActions Actions() {
    return {[this](const std::string& reason) {
              fenced.push_back(reason);
              return size_t{3};
            },
            [this] { ++unfenced; }};
  }
};

TEST(FenceWatchdog, FencesOnceTheLeaseRunsOutAndLiftsItOnContact) {
  metrics::Registry metrics;
  Fences f;
  FenceWatchdog w("h1", "", 400ms, metrics);  // fences 300 ms after the last contact
  w.SetActions(f.Actions());
  w.Begin();
  w.NoteFirstTry();
  w.Tick();
  EXPECT_TRUE(f.fenced.empty());
  EXPECT_FALSE(w.TakeReregister());
  std::this_thread::sleep_for(350ms);
  w.Tick();
  ASSERT_EQ(1u, f.fenced.size());
  EXPECT_NE(std::string::npos, f.fenced[0].find("hostd self-fenced: no successful heartbeat"))
      << f.fenced[0];
  EXPECT_EQ(1, metrics.Get("pgfleet_host_self_fences_total"));
  EXPECT_TRUE(w.TakeReregister()) << "a fenced host comes back as a new generation";
  EXPECT_FALSE(w.TakeReregister()) << "once";
  w.Tick();  // still overdue: fences what started meanwhile, counted once
  EXPECT_EQ(2u, f.fenced.size());
  EXPECT_EQ(1, metrics.Get("pgfleet_host_self_fences_total"));
  w.NoteContact(BootTimeNs());
  w.Tick();
  EXPECT_EQ(1, f.unfenced);
  w.Tick();
  EXPECT_EQ(1, f.unfenced);
}

TEST(FenceWatchdog, ARestartAfterTheLeaseRanOutTriesTheDatabaseFirst) {
  metrics::Registry metrics;
  testing::TempDir tmp;
  const std::string dir = tmp.path();
  {
    LeaseWriter old(dir);
    ASSERT_TRUE(old.Write(BootTimeNs() - int64_t{10} * 1000 * 1000 * 1000));  // 10 s ago
  }
  Fences f;
  FenceWatchdog w("h1", dir, 400ms, metrics);
  w.SetActions(f.Actions());
  w.Begin();  // continues the old lease: long run out
  w.Tick();
  EXPECT_TRUE(f.fenced.empty()) << "no fence before the first database round was tried";
  w.NoteFirstTry();
  w.Tick();
  EXPECT_EQ(1u, f.fenced.size());
  // A contact is written to the lease file for the shims and the next hostd.
  int64_t now = BootTimeNs();
  w.NoteContact(now);
  auto lease = ReadLease(dir);
  ASSERT_TRUE(lease.has_value());
  EXPECT_EQ(now, *lease);
}

TEST(FenceWatchdog, AFirstTryThatHangsDoesNotDelayTheFencePastOneMoreLease) {
  metrics::Registry metrics;
  testing::TempDir tmp;
  const std::string dir = tmp.path();
  {
    LeaseWriter old(dir);
    ASSERT_TRUE(old.Write(BootTimeNs() - int64_t{10} * 1000 * 1000 * 1000));
  }
  Fences f;
  FenceWatchdog w("h1", dir, 400ms, metrics);
  w.SetActions(f.Actions());
  w.Begin();
  w.Tick();
  EXPECT_TRUE(f.fenced.empty());
  std::this_thread::sleep_for(350ms);  // the first try never finished
  w.Tick();
  EXPECT_EQ(1u, f.fenced.size());
}

TEST(ReportQueue, BatchesInOrderPutsBackAtTheFrontAndWakesOnce) {
  ReportQueue q;
  std::atomic<int> wakes{0};
  q.SetWaker([&] { ++wakes; });
  for (int i = 1; i <= 5; ++i) {
    model::Report r;
    r.job = i;
    q.Push(r);
  }
  EXPECT_EQ(5, wakes.load());
  EXPECT_TRUE(q.TakeWake());
  EXPECT_FALSE(q.TakeWake());
  auto batch = q.TakeBatch(3);
  ASSERT_EQ(3u, batch.size());
  EXPECT_EQ(1, batch[0].job);
  // Delivery settled the first one, then failed: 2 and 3 go back before 4.
  q.PutBack(batch, 1);
  auto again = q.TakeBatch(10);
  ASSERT_EQ(4u, again.size());
  std::vector<int64_t> ids;
  for (const auto& r : again) ids.push_back(r.job);
  EXPECT_EQ((std::vector<int64_t>{2, 3, 4, 5}), ids);
  EXPECT_EQ(0u, q.size());
}

TEST(ReportQueue, APushFromAnotherThreadEndsTheWait) {
  ReportQueue q;
  std::atomic<bool> stop{false};
  auto start = std::chrono::steady_clock::now();
  std::thread pusher([&] {
    std::this_thread::sleep_for(50ms);
    q.Push(model::Report{});
  });
  q.WaitUntil(start + 30s, stop);
  pusher.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  EXPECT_EQ(1u, q.size());
}

}  // namespace
}  // namespace pgfleet::hostd
