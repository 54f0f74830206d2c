-- Where to find each scheduler's /health and /metrics (Prometheus), so an
-- operator can point a scraper at every scheduler from one query.
alter table pgfleet.schedulers add column metrics_url text;
comment on column pgfleet.schedulers.metrics_url is
  'Its /health and /metrics endpoint, e.g. http://127.0.0.1:9464 (schedulerd --listen); null before its first heartbeat with it.';
