#pragma once
// Named, prepared statements: how every process's store module
// (schedulerd/store, schedulerd/store_maintenance, hostd/agent/store,
// cli/queries) talks to the database.
//
// A store's statements are written in a .sql file beside it, one block each:
//
//   -- name: schedulerd_claim_pending
//   -- what it returns, what must hold
//   select ... $1 ...;
//
// and the build makes them constants in a header (cmake/embed_queries.cmake):
//
//   inline constexpr db::Statement kClaimPending{"schedulerd_claim_pending", "select ... $1 ..."};
//
// The store includes that header ("schedulerd/store.sql.h"), lists the
// constants once, and calls PrepareAll(conn, list) on every new connection
// (ReconnectingConnection::SetOnConnect does that). Calls then go through
// Exec(tx, kClaimPending, args...), which runs the prepared statement by name.
// A statement's text is a constant, never assembled from strings at run time.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace pgfleet::db {

struct Statement {
  const char* name;  // unique within the process
  const char* sql;
};

// A process whose connections go through a transaction-mode pooler
// (pgbouncer pool_mode = transaction: each transaction may run on another
// server connection) cannot use named prepared statements, which live in one
// server session; it calls UseUnnamedStatements(true) before connecting, and
// every statement is then sent with its text (parsed and planned per call;
// the PL/pgSQL functions it calls still keep their plans per server session).
// Set once at startup, read everywhere after.
void UseUnnamedStatements(bool on);
bool UnnamedStatements();

// Prepares each statement on conn (call once per connection; nothing with
// unnamed statements).
void PrepareAll(pqxx::connection& conn, std::initializer_list<const Statement*> statements);

// Runs a statement prepared by PrepareAll (or, with unnamed statements, its text).
template <typename... Args>
pqxx::result Exec(pqxx::transaction_base& tx, const Statement& s, Args&&... args) {
  if (UnnamedStatements()) return tx.exec_params(s.sql, std::forward<Args>(args)...);
  return tx.exec_prepared(s.name, std::forward<Args>(args)...);
}
template <typename... Args>
pqxx::row Exec1(pqxx::transaction_base& tx, const Statement& s, Args&&... args) {
  if (UnnamedStatements()) return tx.exec_params1(s.sql, std::forward<Args>(args)...);
  return tx.exec_prepared1(s.name, std::forward<Args>(args)...);
}
template <typename... Args>
void Exec0(pqxx::transaction_base& tx, const Statement& s, Args&&... args) {
  if (UnnamedStatements()) {
    tx.exec_params0(s.sql, std::forward<Args>(args)...);
  } else {
    tx.exec_prepared0(s.name, std::forward<Args>(args)...);
  }
}

// A text parameter that is null when empty.
inline std::optional<std::string> NullIfEmpty(const std::string& v) {
  if (v.empty()) return std::nullopt;
  return v;
}

// A PostgreSQL array literal for a parameter ("{1,2,3}", "{\"a\",\"b\\\"c\"}"),
// to pass as $n::bigint[] / $n::text[] (libpqxx 6 has no array parameters).
std::string ArrayParam(const std::vector<int64_t>& values);
std::string ArrayParam(const std::vector<int>& values);
std::string ArrayParam(const std::vector<std::string>& values);

}  // namespace pgfleet::db
