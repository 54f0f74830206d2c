#pragma once
// What the schema tests (schema_*_test.cpp) share: a statement's error as the
// server words it, the NOTIFY payloads a listener receives, and the idle lock
// a scheduler takes to fall asleep.

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/test_support.h"

namespace pgfleet::testing_schema {

using testing::TestDatabase;

// Runs sql in its own transaction; returns the server's error message, or ""
// when the statement succeeded (and was committed).
inline std::string ErrorOf(const TestDatabase& db, const std::string& sql) {
  auto conn = db.Connect();
  try {
    pqxx::work tx(*conn);
    tx.exec(sql);
    tx.commit();
  } catch (const pqxx::sql_error& e) {
    return e.what();
  }
  return "";
}

// Collects every payload delivered on a channel.
class Collector : public pqxx::notification_receiver {
 public:
  Collector(pqxx::connection& conn, const std::string& channel)
      : pqxx::notification_receiver(conn, channel) {}
  void operator()(const std::string& payload, int /*backend_pid*/) override {
    payloads.push_back(payload);
  }
  std::vector<std::string> payloads;
};

// Waits the whole window, so that a surplus notification would be seen too.
inline void CollectFor(pqxx::connection& conn, std::chrono::milliseconds window) {
  auto deadline = std::chrono::steady_clock::now() + window;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    conn.await_notification(left.count() / 1000000, left.count() % 1000000);
  }
  conn.get_notifs();
}

// What a scheduler does before it sleeps: take the idle lock exclusively.
inline bool TryIdleLock(pqxx::connection& conn) {
  pqxx::nontransaction tx(conn);
  return tx.exec1("select pg_try_advisory_lock(pgfleet.lock_class(), pgfleet.idle_lock_key())")[0]
      .as<bool>();
}

}  // namespace pgfleet::testing_schema
