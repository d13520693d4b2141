package fence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/fence"
	"github.com/quorumlock/quorumlock/node/memnode"
	"github.com/quorumlock/quorumlock/redlock"
)

// A lease's fencing token guards the writes to an object: the holder
// writes with its token under Mutex.Do; an earlier holder, paused past its
// lease and writing late with its lower token, is refused by the store
// (here MemStore; S3 and GCS work the same way, docs/fencing.md).
func ExamplePutObject() {
	client, err := redlock.New([]redlock.Node{memnode.New("redis-1:6379"), memnode.New("redis-2:6379"), memnode.New("redis-3:6379")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mutex, err := client.NewMutex("reports:daily", redlock.WithFencing())
	if err != nil {
		fmt.Println(err)
		return
	}
	var store fence.MemStore

	old, err := mutex.Lock(ctx) // the earlier holder, which will write late
	if err != nil {
		fmt.Println(err)
		return
	}
	oldToken, _ := old.Fence()
	old.Unlock(ctx)

	err = mutex.Do(ctx, func(ctx context.Context, lease *redlock.Lease) error {
		token, _ := lease.Fence()
		return fence.PutObject(ctx, &store, "reports/daily.csv", fence.Token(token), []byte("new totals"))
	})
	fmt.Println("Do:", err)

	err = fence.PutObject(ctx, &store, "reports/daily.csv", fence.Token(oldToken), []byte("stale totals"))
	fmt.Println("late write refused:", errors.Is(err, fence.ErrStale))
	data, _, _ := store.Get("reports/daily.csv")
	fmt.Printf("the object holds %q\n", data)
	// Output:
	// Do: <nil>
	// late write refused: true
	// the object holds "new totals"
}

// An HTTP service that guards its writes: the client sends its token in
// the Quorumlock-Fence header, the handler reads it and writes through a
// guard, answering 409 Conflict to a stale token and 400 to a request
// without one.
func ExampleFromHeader() {
	var store fence.MemStore
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, err := fence.FromHeader(r.Header)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch err := fence.PutObject(r.Context(), &store, r.URL.Path, token, body); {
		case errors.Is(err, fence.ErrStale):
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()

	put := func(token fence.Token, body string) {
		req, err := http.NewRequest(http.MethodPut, srv.URL+"/reports/daily.csv", strings.NewReader(body))
		if err != nil {
			fmt.Println(err)
			return
		}
		if token != 0 {
			fence.SetHeader(req.Header, token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		fmt.Println(strings.TrimSpace(fmt.Sprint(resp.StatusCode, " ", string(msg))))
	}
	put(7, "new totals")
	put(5, "stale totals")
	put(0, "no token")
	// Output:
	// 204
	// 409 fence: stale token 5 for "/reports/daily.csv": the resource has seen 7
	// 400 fence: no token: no Quorumlock-Fence header
}

// A command started by "quorumlock run --fencing NAME -- COMMAND" finds
// its lease's token in QUORUMLOCK_FENCE (set by hand here, as run sets it).
func ExampleFromEnv() {
	os.Setenv(fence.EnvVar, "1795598639662539")
	defer os.Unsetenv(fence.EnvVar)
	token, err := fence.FromEnv()
	fmt.Println(token, err)

	os.Setenv(fence.EnvVar, "12ab")
	_, err = fence.FromEnv()
	fmt.Println(err)
	// Output:
	// 1795598639662539 <nil>
	// fence: invalid token: QUORUMLOCK_FENCE="12ab": not a decimal integer from 1 to 9223372036854775807
}
