package redlockprometheus_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/observe/redlockprometheus"
	"github.com/quorumlock/quorumlock/redlock"
)

// Register the Observer, give it to the client, and serve /metrics. Here the
// masters are in memory and the scrape is a test server's.
func Example() {
	obs := redlockprometheus.New(redlockprometheus.WithLockClass(func(name string) string {
		class, _, _ := strings.Cut(name, ":") // "invoices:42" -> "invoices"
		return class
	}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)

	nodes := []redlock.Node{memnode.New("redis-1:6379"), memnode.New("redis-2:6379"), memnode.New("redis-3:6379")}
	client, err := redlock.New(nodes, redlock.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	defer client.Close(context.Background())
	mutex, err := client.NewMutex("invoices:42")
	if err != nil {
		panic(err)
	}
	lease, err := mutex.Lock(context.Background())
	if err != nil {
		panic(err)
	}
	if err := lease.Unlock(context.Background()); err != nil {
		panic(err)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		panic(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "quorumlock_lock_wait_seconds_count") || strings.HasPrefix(line, "quorumlock_lease_held_seconds_count") {
			fmt.Println(line)
		}
	}
	// Output:
	// quorumlock_lease_held_seconds_count{class="invoices",end="released",shape="mutex"} 1
	// quorumlock_lock_wait_seconds_count{class="invoices",outcome="ok",shape="mutex"} 1
}
