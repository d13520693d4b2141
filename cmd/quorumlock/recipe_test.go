package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/fence"
	"github.com/quorumlock/quorumlock/internal/redisproc"
	"github.com/quorumlock/quorumlock/node/redisnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// migrateOnce is docs/operations.md's "must never run twice" recipe, as it
// appears there between the BEGIN and END lines
// (TestRecipeIsTheDocs keeps the two identical). urls are the masters,
// durable those of them (host:port) that run appendfsync always, store the
// resource that records the migration (an object store, here in memory;
// fence.PutObject checks the fencing tokens), and migrate the work, which
// writes through write only.
func migrateOnce(ctx context.Context, urls, durable []string, store *fence.MemStore,
	migrate func(ctx context.Context, write func(string) error) error) error {
	// BEGIN recipe
	nodes, err := redisnode.DialAll(urls...) // host:port, redis://user:pw@host:port, rediss://...
	if err != nil {
		return err
	}
	defer nodes.Close()
	client, err := redlock.New(nodes.Redlock(),
		// A master that restarted (or failed over) does not vote until every
		// key it may have lost has expired (0: the TTL plus the lock-delay),
		// except those that keep their keys: appendfsync always.
		redlock.WithRestartQuarantine(0, durable...))
	if err != nil {
		return err
	}
	defer func() {
		// Bounded: waits for the release; what is left expires with its TTL.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Close(ctx)
	}()
	mutex, err := client.NewMutex("migrations:2026-11-add-index",
		redlock.WithTTL(10*time.Second),
		redlock.WithFencing(),                 // a token the store checks on every write
		redlock.WithLockDelay(10*time.Second), // after a crash, late writes land first
		redlock.WithMaxWait(30*time.Second))   // the wait for the lock, apart from the work
	if err != nil {
		return err
	}
	const record = "migrations/2026-11-add-index"
	return mutex.Do(ctx, func(ctx context.Context, lease *redlock.Lease) error {
		token, _ := lease.Fence()
		if done, _, _ := store.Get(record); string(done) == "done" {
			return nil // an earlier holder ran it: the store says so, not the lock
		}
		// Every write goes through a guard with the token: a holder that was
		// paused past its lease and writes late is refused (fence.ErrStale)
		// once a newer one has written.
		write := func(v string) error {
			return fence.PutObject(ctx, store, record, fence.Token(token), []byte(v))
		}
		if err := migrate(ctx, write); err != nil { // stops when ctx is done
			return err
		}
		return write("done")
	})
	// END recipe
}

// TestRecipeRunsOnce: five clients run the recipe at
// once on three masters with appendfsync always; the migration runs once,
// and every call returns nil.
func TestRecipeRunsOnce(t *testing.T) {
	var urls []string
	for range 3 {
		urls = append(urls, redisproc.StartT(t, redisproc.Config{AppendOnly: true}).Addr())
	}
	var store fence.MemStore
	var runs atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() {
			errs[i] = migrateOnce(t.Context(), urls, urls, &store, func(ctx context.Context, write func(string) error) error {
				runs.Add(1)
				return write(fmt.Sprintf("migrating (client %d)", i))
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil || runs.Load() != 1 {
		t.Fatalf("%d migrations, errors %v; want 1 and none", runs.Load(), err)
	}
	if v, _, _ := store.Get("migrations/2026-11-add-index"); string(v) != "done" {
		t.Errorf("the store holds %q, want done", v)
	}
}

// TestRecipeIsTheDocs: docs/operations.md shows migrateOnce's body as it
// is.
func TestRecipeIsTheDocs(t *testing.T) { docShowsBlock(t, "recipe_test.go", "recipe") }

// docShowsBlock checks that docs/operations.md shows the lines of file
// between "// BEGIN name" and "// END name", one tab less indented.
func docShowsBlock(t *testing.T, file, name string) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "\t// BEGIN "+name+"\n")
	body, _, _ = strings.Cut(body, "\t// END "+name+"\n")
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(lines, "\n") + "\n"; body == "" || !strings.Contains(string(doc), want) {
		t.Errorf("docs/operations.md does not show %s as %s has it:\n%s", name, file, want)
	}
}
