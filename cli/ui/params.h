#pragma once
// The dashboard API's query parameters and path ids, checked before anything
// reaches the database: a bad one is a BadParam naming the parameter and its
// rule, answered 400 (routes.cpp). Pure code (unit-tested).

#include <httplib.h>

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "cli/ui/ui_store.h"

namespace pgfleet::cli::ui {

class BadParam : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Longest value a text filter may have.
inline constexpr size_t kMaxParamLength = 200;

// Every parameter of req is one of `allowed`, given once; else BadParam.
void OnlyParams(const httplib::Request& req, std::initializer_list<const char*> allowed);

// A text filter: "" when absent; at most kMaxParamLength bytes with no
// control characters.
std::string TextParam(const httplib::Request& req, const char* name);

// An integer parameter in [min, max]; `fallback` when absent.
int64_t IntParam(const httplib::Request& req, const char* name, int64_t min, int64_t max,
                 int64_t fallback);

// A job id from the path: a positive integer that fits a bigint.
int64_t JobIdParam(const std::string& text);

// GET /api/jobs's filters: state (a job state), formation, host, owner, limit (1-1000).
JobsQuery ParseJobsQuery(const httplib::Request& req);

}  // namespace pgfleet::cli::ui
