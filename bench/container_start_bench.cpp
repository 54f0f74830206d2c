// Job starts per second on one host, per driver: each job is started and
// waited for (Start + Wait, i.e. the whole life of a job that exits at once),
// one at a time and with 8 in flight.
//
//   sudo build/bench/container_start_bench [--jobs N] [--inflight K] [--rootfs DIR]
//
// process runs /bin/true; container runs busybox `true` in a rootfs made by
// scripts/make-rootfs (or --rootfs DIR), and `/bin/true` on the read-only host
// filesystem (no rootfs), also with a disk of 64 MiB of its own (spec.disk).
// The container rows need root and cgroups; without
// them they are reported as unavailable. The target is >= 200 container
// starts/s.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hostd/drivers/driver_factory.h"
#include "hostd/drivers/container/container.h"
#include "hostd/drivers/driver.h"

namespace {

using Clock = std::chrono::steady_clock;
using pgfleet::hostd::Driver;
using pgfleet::hostd::RunRequest;

struct Row {
  double starts_per_second = 0;
  double start_ms_p50 = 0;  // Start() latency alone
  double start_ms_p99 = 0;
  int failures = 0;
};

std::string g_dir;
std::string g_host;
std::atomic<int64_t> g_next_job{1};

int g_disk_mib = 0;  // the job's disk (spec.disk) of the row being measured

RunRequest MakeRequest(const std::vector<std::string>& argv, const std::string& rootfs) {
  RunRequest r;
  r.job_id = g_next_job++;
  r.attempt = 1;
  r.host_id = g_host;
  r.spec.command = argv;
  r.spec.rootfs = rootfs;
  r.spec.disk = g_disk_mib;
  r.attempt_dir = g_dir + "/jobs/" + std::to_string(r.job_id);
  mkdir(r.attempt_dir.c_str(), 0700);
  r.job_dir = r.attempt_dir + "/work";
  mkdir(r.job_dir.c_str(), 0700);
  r.log_path = r.attempt_dir + ".log";
  return r;
}

Row Measure(Driver& driver, const std::vector<std::string>& argv, const std::string& rootfs,
            int jobs, int inflight) {
  std::vector<std::vector<double>> latencies(inflight);
  std::atomic<int> failures{0};
  std::atomic<int> remaining{jobs};
  auto worker = [&](int w) {
    while (remaining.fetch_sub(1) > 0) {
      RunRequest req = MakeRequest(argv, rootfs);
      try {
        auto t0 = Clock::now();
        auto exec = driver.Start(req);
        latencies[w].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        auto st = exec->Wait();
        if (st.exit_code != 0) ++failures;
      } catch (const std::exception& e) {
        if (failures++ == 0) std::fprintf(stderr, "  first failure: %s\n", e.what());
      }
    }
  };
  auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int w = 0; w < inflight; ++w) threads.emplace_back(worker, w);
  for (auto& t : threads) t.join();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  Row row;
  row.starts_per_second = jobs / seconds;
  row.failures = failures;
  if (!all.empty()) {
    row.start_ms_p50 = all[all.size() / 2];
    row.start_ms_p99 = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  return row;
}

void Report(const char* name, const Row& seq, const Row& par) {
  std::printf("%-26s %10.0f %10.2f %10.2f   %10.0f %10.2f %10.2f %8d\n", name,
              seq.starts_per_second, seq.start_ms_p50, seq.start_ms_p99, par.starts_per_second,
              par.start_ms_p50, par.start_ms_p99, seq.failures + par.failures);
}

}  // namespace

int main(int argc, char** argv) {
  int jobs = 1000;
  int inflight = 8;
  std::string rootfs;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--jobs" && i + 1 < argc) {
      jobs = std::atoi(argv[++i]);
    } else if (a == "--inflight" && i + 1 < argc) {
      inflight = std::atoi(argv[++i]);
    } else if (a == "--rootfs" && i + 1 < argc) {
      rootfs = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--jobs N] [--inflight K] [--rootfs DIR]\n", argv[0]);
      return 2;
    }
  }
  if (jobs <= 0 || inflight <= 0) {
    std::fprintf(stderr, "--jobs and --inflight must be > 0\n");
    return 2;
  }

  char tmpl[] = "/tmp/pgfleet-start-bench-XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return 1;
  }
  g_dir = tmpl;
  mkdir((g_dir + "/jobs").c_str(), 0755);
  mkdir((g_dir + "/data").c_str(), 0755);

  pgfleet::hostd::DriverOptions opts;
  opts.data_dir = g_dir + "/data";
  opts.host_id = g_host = "bench-" + std::to_string(getpid());

  std::string why;
  bool containers = pgfleet::hostd::ContainerDriverAvailable(&why);
  if (containers && rootfs.empty()) {
    rootfs = g_dir + "/data/rootfs/busybox";
    std::string cmd =
        std::string(PGFLEET_SOURCE_DIR) + "/scripts/make-rootfs busybox " + rootfs + " >/dev/null";
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "scripts/make-rootfs failed\n");
      return 1;
    }
  }

  unsigned cpus = std::thread::hardware_concurrency();
  std::printf("%d jobs per row, %u CPUs; starts/s counts Start+Wait of a job that exits at once\n",
              jobs, cpus);
  std::printf("%-26s %10s %10s %10s   %10s %10s %10s %8s\n", "", "seq/s", "p50 ms", "p99 ms",
              ("x" + std::to_string(inflight) + " /s").c_str(), "p50 ms", "p99 ms", "failed");

  {
    auto driver = pgfleet::hostd::MakeDriver("process", opts);
    Row seq = Measure(*driver, {"/bin/true"}, "", jobs, 1);
    Row par = Measure(*driver, {"/bin/true"}, "", jobs, inflight);
    Report("process /bin/true", seq, par);
  }
  if (containers) {
    auto driver = pgfleet::hostd::MakeDriver("container", opts);
    Row seq = Measure(*driver, {"true"}, rootfs, jobs, 1);
    Row par = Measure(*driver, {"true"}, rootfs, jobs, inflight);
    Report("container busybox true", seq, par);
    seq = Measure(*driver, {"/bin/true"}, "", jobs, 1);
    par = Measure(*driver, {"/bin/true"}, "", jobs, inflight);
    Report("container host-fs /bin/true", seq, par);
    // A job with a disk of its own (mke2fs, a loop device, an ext4 mount).
    g_disk_mib = 64;
    seq = Measure(*driver, {"/bin/true"}, "", jobs, 1);
    par = Measure(*driver, {"/bin/true"}, "", jobs, inflight);
    Report("container host-fs disk 64", seq, par);
    g_disk_mib = 0;
  } else {
    std::printf("container: unavailable (%s)\n", why.c_str());
  }

  std::string rm = "rm -rf '" + g_dir + "'";
  return std::system(rm.c_str()) == 0 ? 0 : 1;
}
