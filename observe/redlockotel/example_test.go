package redlockotel_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/observe/redlockotel"
	"github.com/quorumlock/quorumlock/redlock"
)

// Add go-redis's redisotel tracing hook to the clients of your masters and
// give those clients to redisnode.New: every Redis command a lock sends then
// shows as a child of the lock operation's span (quorumlock.acquire,
// quorumlock.extend, quorumlock.release). Here the masters are three
// redis-server processes started for the example, and the spans go to an
// in-memory exporter (yours: OTLP).
func Example() {
	ctx := context.Background()
	addrs, stop := startServers(3)
	defer stop()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer tp.Shutdown(ctx)

	var nodes []redlock.Node
	for _, addr := range addrs {
		rdb := redis.NewClient(&redis.Options{
			Addr:                  addr,
			ContextTimeoutEnabled: true, // redisnode.New requires it
			MaxRetries:            -1,   // never re-send an acquire
			DialerRetries:         1,
			DisableIdentity:       true, // no CLIENT SETINFO: the minimal ACL suffices
			Protocol:              2,
			// Maintenance notifications need RESP3 (and resolve the host name).
			MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		})
		defer rdb.Close()
		if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tp)); err != nil {
			panic(err)
		}
		node, err := redisnode.New(rdb)
		if err != nil {
			panic(err)
		}
		nodes = append(nodes, node)
	}
	obs, err := redlockotel.New(redlockotel.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	// Generous node timeouts: a first call under go test -race on a loaded
	// machine can take longer than the 50ms default.
	client, err := redlock.New(nodes, redlock.WithObserver(obs), redlock.WithNodeTimeout(time.Second), redlock.WithReleaseTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	mutex, err := client.NewMutex("invoices:42")
	if err != nil {
		panic(err)
	}
	lease, err := mutex.Lock(ctx)
	if err != nil {
		panic(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		panic(err)
	}
	if err := client.Close(ctx); err != nil { // waits for the calls behind the quorum
		panic(err)
	}

	// Each lock span, with the names of its children: go-redis's commands.
	spans := exporter.GetSpans()
	for _, s := range spans {
		if !strings.HasPrefix(s.Name, "quorumlock.") {
			continue
		}
		var kids []string
		for _, k := range spans {
			if k.Parent.SpanID() == s.SpanContext.SpanID() && !slices.Contains(kids, k.Name) {
				kids = append(kids, k.Name)
			}
		}
		slices.Sort(kids)
		fmt.Printf("%s: %s\n", s.Name, strings.Join(kids, " "))
	}
	// Output:
	// quorumlock.acquire: eval evalsha info
	// quorumlock.release: eval evalsha
}

// startServers starts n redis-server processes for the example (the first
// EVALSHA of each script on a new server meets NOSCRIPT, and go-redis sends
// EVAL then: hence both names above).
func startServers(n int) (addrs []string, stop func()) {
	var servers []*redisproc.Server
	stop = func() {
		for _, s := range servers {
			_ = s.Stop()
		}
	}
	for range n {
		s, err := redisproc.Start(redisproc.Config{})
		if err != nil {
			stop()
			panic(err)
		}
		servers = append(servers, s)
		addrs = append(addrs, s.Addr())
	}
	return addrs, stop
}
