package main

// quorumlock run's logger (log/slog, --log-level) and its Prometheus
// endpoint (--metrics-addr). See docs/operations.md, "Watching it".

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quorumlock/quorumlock/observe/redlockprometheus"
	"github.com/quorumlock/quorumlock/redlock"
)

// levelFlag is --log-level: debug, info, warn or error.
type levelFlag struct {
	level slog.Level
	set   bool
}

func (l *levelFlag) String() string { return strings.ToLower(l.level.String()) }

func (l *levelFlag) Set(s string) error {
	switch strings.ToLower(s) {
	case "debug":
		l.level = slog.LevelDebug
	case "info":
		l.level = slog.LevelInfo
	case "warn", "warning":
		l.level = slog.LevelWarn
	case "error":
		l.level = slog.LevelError
	default:
		return errors.New("want debug, info, warn or error")
	}
	l.set = true
	return nil
}

// lineHandler is run's slog.Handler: each record at its level or above is
// one line on w, "quorumlock run: " + the message + the attributes as
// key=value (slog.TextHandler's quoting), without time or level: cron, a
// journal or a terminal read it, and they add the time themselves.
type lineHandler struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	level  slog.Leveler
	buf    *bytes.Buffer // the attributes of the record being written, under mu
	attrs  slog.Handler  // a TextHandler writing to buf, without time, level and message
}

func newLineHandler(w io.Writer, prefix string, level slog.Leveler) *lineHandler {
	buf := &bytes.Buffer{}
	drop := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && (a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
			return slog.Attr{}
		}
		return a
	}
	return &lineHandler{mu: &sync.Mutex{}, w: w, prefix: prefix, level: level, buf: buf,
		attrs: slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: drop})}
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *lineHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf.Reset()
	r.Time = time.Time{} // a zero time is left out
	if err := h.attrs.Handle(ctx, r); err != nil {
		return err
	}
	line := h.prefix + r.Message
	if a := strings.TrimSpace(h.buf.String()); a != "" {
		line += " " + a
	}
	_, err := io.WriteString(h.w, line+"\n")
	return err
}

func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = h.attrs.WithAttrs(as)
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.attrs = h.attrs.WithGroup(name)
	return &c
}

// goRedisLog routes go-redis's own log lines (failed dials, pool errors:
// one per failed attempt while a master is down) to run's logger at Debug,
// with component=go-redis: run says what matters in one line, and the
// library's warnings name every master's answer.
type goRedisLog struct{ l *slog.Logger }

func (g goRedisLog) Printf(ctx context.Context, format string, v ...any) {
	g.l.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}

// metricsAtExit, when set (by tests), is called with run's registry after
// the lease ended and before the metrics server stops.
var metricsAtExit func(prometheus.Gatherer)

// runMetrics is run's /metrics endpoint: the lock's instruments
// (observe/redlockprometheus), run's own gauges and the Go runtime's, on a
// registry of their own.
type runMetrics struct {
	obs   *redlockprometheus.Observer
	reg   *prometheus.Registry
	ln    net.Listener
	srv   *http.Server
	done  chan struct{} // closed when Serve returned
	lease atomic.Pointer[redlock.Lease]
}

// listenMetrics listens on addr (host:port; port 0 picks a free one) and
// serves the metrics about lock name on /metrics until close.
func listenMetrics(addr, name string) (*runMetrics, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %q: %w", bounded(addr), err)
	}
	m := &runMetrics{obs: redlockprometheus.New(), reg: prometheus.NewRegistry(), ln: ln, done: make(chan struct{})}
	labels := prometheus.Labels{"lock": name}
	m.reg.MustRegister(m.obs, collectors.NewGoCollector(),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "quorumlock_run_lock_held", ConstLabels: labels,
			Help: "1 while quorumlock run holds the lock (its lease is valid), else 0 (waiting, or the lease ended)."},
			func() float64 {
				if l := m.lease.Load(); l != nil && l.Valid() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "quorumlock_run_validity_seconds", ConstLabels: labels,
			Help: "Seconds left until the lease's validity deadline (renewals move it), 0 when quorumlock run does not hold the lock."},
			func() float64 {
				if l := m.lease.Load(); l != nil && l.Valid() {
					return max(time.Until(l.Until()).Seconds(), 0)
				}
				return 0
			}),
	)
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln) // ErrServerClosed after close
	}()
	return m, nil
}

// url is where the metrics are served.
func (m *runMetrics) url() string { return "http://" + m.ln.Addr().String() + "/metrics" }

// hold records the lease run holds; a nil m (no --metrics-addr) does
// nothing.
func (m *runMetrics) hold(l *redlock.Lease) {
	if m != nil {
		m.lease.Store(l)
	}
}

// close stops the server (open scrapes are cut) and waits for it.
func (m *runMetrics) close() {
	if metricsAtExit != nil {
		metricsAtExit(m.reg)
	}
	_ = m.srv.Close()
	<-m.done
}
