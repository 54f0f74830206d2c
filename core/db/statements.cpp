#include "core/db/statements.h"

#include <atomic>

namespace pgfleet::db {

namespace {
std::atomic<bool> unnamed_statements{false};
}  // namespace

void UseUnnamedStatements(bool on) { unnamed_statements = on; }
bool UnnamedStatements() { return unnamed_statements.load(std::memory_order_relaxed); }

void PrepareAll(pqxx::connection& conn, std::initializer_list<const Statement*> statements) {
  if (UnnamedStatements()) return;
  for (const Statement* s : statements) conn.prepare(s->name, s->sql);
}

namespace {

template <typename T>
std::string Numbers(const std::vector<T>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(values[i]);
  }
  return out + "}";
}

}  // namespace

std::string ArrayParam(const std::vector<int64_t>& values) { return Numbers(values); }
std::string ArrayParam(const std::vector<int>& values) { return Numbers(values); }

std::string ArrayParam(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

}  // namespace pgfleet::db
