#pragma once
// Hostile HTTP traffic against hostd APIs, from a background thread, while a
// test runs its normal workload (robustness issue): malformed requests,
// slow senders (one header line every 2 s), oversized bodies, deeply nested
// JSON, unauthorized requests with bodies followed by a request on the same
// connection, stops and log reads of attempts nobody has. Raw sockets to
// 127.0.0.1 only. Each round picks a host at random from `targets()`.

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace pgfleet::testing {

struct HostileTarget {
  int port = 0;
  std::string prefix;  // "" for a real hostd; "/hosts/<id>" for a hollow host
};

class HostileTraffic {
 public:
  // targets() is called each round (hosts may come and go); token: the
  // cluster token, for the cases that get past authentication.
  HostileTraffic(std::function<std::vector<HostileTarget>()> targets, std::string token);
  ~HostileTraffic();
  HostileTraffic(const HostileTraffic&) = delete;
  HostileTraffic& operator=(const HostileTraffic&) = delete;

  void Stop();
  // Requests sent (each kind counts one per attempt, answered or not).
  long sent() const { return sent_; }
  // Slow connections the server closed before the sender was done.
  long slow_cut() const { return slow_cut_; }

 private:
  void Run();
  void Round(const HostileTarget& t);

  std::function<std::vector<HostileTarget>()> targets_;
  std::string token_;
  std::atomic<bool> stop_{false};
  std::atomic<long> sent_{0};
  std::atomic<long> slow_cut_{0};
  std::vector<std::thread> threads_;
};

// The port of an http://127.0.0.1:PORT URL (0 if it is not one).
int PortOf(const std::string& url);

// A TCP connection to 127.0.0.1:port with send and receive timeouts; -1 if refused.
int ConnectLoopback(int port, int timeout_seconds = 3);

}  // namespace pgfleet::testing
