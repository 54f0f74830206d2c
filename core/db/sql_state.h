#pragma once
// The PostgreSQL error codes (SQLSTATE) pgfleet's code acts on, by name
// (the names are PostgreSQL's, Appendix A of its documentation), and the
// classes it tells apart. Compare pqxx::sql_error::sqlstate() with these,
// never with a literal.

#include <string_view>

namespace pgfleet::db::sqlstate {

inline constexpr std::string_view kLockNotAvailable = "55P03";
inline constexpr std::string_view kUndefinedTable = "42P01";
inline constexpr std::string_view kUndefinedFunction = "42883";
inline constexpr std::string_view kInvalidSchemaName = "3F000";
inline constexpr std::string_view kUndefinedObject = "42704";  // a type, a domain

// Class 22 (data exception), 23 (integrity constraint violation) and P0
// (PL/pgSQL raise, our checks): the statement's data is at fault, so the
// same statement fails the same way again.
inline bool IsDataError(std::string_view state) {
  return state.substr(0, 2) == "22" || state.substr(0, 2) == "23" ||
         state.substr(0, 2) == "P0";
}

}  // namespace pgfleet::db::sqlstate
