package service

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus metrics, on a registry of its own
// (so that several servers can run in one process, as in tests).
type metrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	reports       *prometheus.CounterVec
	enrolments    prometheus.Counter
	releases      *prometheus.CounterVec
	commitSeconds prometheus.Histogram
	batchSize     prometheus.Histogram
	batchRetries  prometheus.Counter
	rateLimited   prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "privrec_http_requests_total", Help: "HTTP requests by route and status code."}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "privrec_http_request_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 5, 30}}, []string{"route"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "privrec_reports_total", Help: "Report submissions by outcome (stored, duplicate, conflict, over_budget, invalid)."}, []string{"outcome"}),
		enrolments: prometheus.NewCounter(prometheus.CounterOpts{Name: "privrec_enrolments_total", Help: "Users enrolled."}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "privrec_releases_total", Help: "Release requests by outcome."}, []string{"outcome"}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "privrec_commit_seconds", Help: "Duration of a group-commit transaction (durable).",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1}}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "privrec_commit_batch_size", Help: "Writes per group-commit transaction.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}}),
		batchRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "privrec_commit_batch_retries_total", Help: "Batches whose transaction failed and whose writes were retried one by one."}),
		rateLimited: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "privrec_rate_limited_total", Help: "Requests refused by the per-token or per-address rate limit."}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.reports, m.enrolments, m.releases, m.commitSeconds, m.batchSize, m.batchRetries, m.rateLimited,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
