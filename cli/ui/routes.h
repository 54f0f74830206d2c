#pragma once
// The dashboard's HTTP surface on an httplib server: the page and its
// assets (built into the binary, cli/ui/assets/), the JSON API
// (GET /api/summary, /api/hosts, /api/formations, /api/jobs?state=&formation=
// &host=&owner=&limit=, /api/jobs/ID, /api/jobs/ID/log?attempt=&tail=) and
// the event stream (GET /api/events, change_feed.h).
//
// What must hold: read-only (every method but GET and HEAD answers 405);
// every answer carries a strict Content-Security-Policy (default-src 'self'),
// X-Content-Type-Options nosniff and no CORS header; a bad parameter is a
// 400 naming it and its rule, an unknown route or asset a 404, a database
// failure a 503; no input makes a handler throw out of it.

#include <httplib.h>

#include "cli/ui/change_feed.h"
#include "cli/ui/ui_store.h"

namespace pgfleet::cli::ui {

void InstallRoutes(httplib::Server& server, UiStore& store, ChangeFeed& feed);

}  // namespace pgfleet::cli::ui
