package fence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/quorumlock/quorumlock/fence"
)

// TestPutObject: one writer after another on MemStore. A new object takes
// any token, an equal token is accepted, a lower one refused naming both
// and leaving the object as it was, a token below 1 refused.
func TestPutObject(t *testing.T) {
	ctx := t.Context()
	var s fence.MemStore
	for i, tok := range []fence.Token{5, 5, 7} {
		if err := fence.PutObject(ctx, &s, "reports/daily", tok, []byte(fmt.Sprint("v", i))); err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	err := fence.PutObject(ctx, &s, "reports/daily", 6, []byte("stale"))
	var stale *fence.StaleError
	if !errors.As(err, &stale) || !errors.Is(err, fence.ErrStale) || stale.Token != 6 || stale.Highest != 7 || stale.Resource != "reports/daily" {
		t.Fatalf("token 6 after 7: %v", err)
	}
	for _, tok := range []fence.Token{0, -1} {
		if err := fence.PutObject(ctx, &s, "reports/daily", tok, nil); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("token %d: %v", tok, err)
		}
	}
	if data, tok, ok := s.Get("reports/daily"); !ok || string(data) != "v2" || tok != 7 {
		t.Errorf("object %q token %d (found %v), want v2 with 7", data, tok, ok)
	}
	if data, tok, ok := s.Get("reports/none"); ok || data != nil || tok != 0 {
		t.Errorf("no object: %q %d %v", data, tok, ok)
	}
}

// TestMemStorePutIf: a conditional write takes the current version only
// ("" for an object that does not exist), and each write makes a new one.
func TestMemStorePutIf(t *testing.T) {
	ctx := t.Context()
	var s fence.MemStore
	if err := s.PutIf(ctx, "o", []byte("a"), 1, "1"); !errors.Is(err, fence.ErrPrecondition) {
		t.Fatalf("a version for an object that does not exist: %v", err)
	}
	if err := s.PutIf(ctx, "o", []byte("a"), 1, ""); err != nil {
		t.Fatal(err)
	}
	v1, tok, err := s.Stat(ctx, "o")
	if err != nil || v1 == "" || tok != 1 {
		t.Fatalf("Stat: %q %d %v", v1, tok, err)
	}
	if err := s.PutIf(ctx, "o", []byte("b"), 2, ""); !errors.Is(err, fence.ErrPrecondition) {
		t.Fatalf("create over an existing object: %v", err)
	}
	data := []byte("b")
	if err := s.PutIf(ctx, "o", data, 2, v1); err != nil {
		t.Fatal(err)
	}
	data[0] = 'x' // the store keeps a copy
	if err := s.PutIf(ctx, "o", []byte("c"), 3, v1); !errors.Is(err, fence.ErrPrecondition) || !strings.Contains(err.Error(), fmt.Sprintf("not %q", v1)) {
		t.Fatalf("an old version: %v", err)
	}
	if got, tok, _ := s.Get("o"); string(got) != "b" || tok != 2 {
		t.Errorf("object %q token %d", got, tok)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := s.Stat(cancelled, "o"); !errors.Is(err, context.Canceled) {
		t.Errorf("Stat on a cancelled context: %v", err)
	}
}

// interleaved is an ObjectStore that runs between, once, after its first
// Stat returns and before the caller can write: another writer coming in
// between a guard's read and its write.
type interleaved struct {
	fence.ObjectStore
	once    sync.Once
	between func()
	puts    int
}

func (s *interleaved) Stat(ctx context.Context, name string) (string, fence.Token, error) {
	v, tok, err := s.ObjectStore.Stat(ctx, name)
	s.once.Do(s.between)
	return v, tok, err
}

func (s *interleaved) PutIf(ctx context.Context, name string, data []byte, tok fence.Token, version string) error {
	s.puts++
	return s.ObjectStore.PutIf(ctx, name, data, tok, version)
}

// TestPutObjectAnotherWriterInBetween: writer 9 reads the object's token
// (5), then writer 10 writes before 9 does. 9's conditional write fails on
// the version, its second round reads 10 and refuses 9. With 11 instead of
// 9, the second round writes.
func TestPutObjectAnotherWriterInBetween(t *testing.T) {
	for _, c := range []struct {
		token fence.Token
		want  string
	}{{9, "ten"}, {11, "eleven"}} {
		t.Run(c.want, func(t *testing.T) {
			ctx := t.Context()
			var mem fence.MemStore
			if err := fence.PutObject(ctx, &mem, "o", 5, []byte("five")); err != nil {
				t.Fatal(err)
			}
			s := &interleaved{ObjectStore: &mem, between: func() {
				if err := fence.PutObject(ctx, &mem, "o", 10, []byte("ten")); err != nil {
					t.Error(err)
				}
			}}
			err := fence.PutObject(ctx, s, "o", c.token, []byte(c.want))
			var stale *fence.StaleError
			if c.want == "ten" && (!errors.As(err, &stale) || stale.Highest != 10 || stale.Token != 9) {
				t.Errorf("9 after 10 came in between: %v", err)
			}
			if c.want != "ten" && err != nil {
				t.Errorf("11 after 10 came in between: %v", err)
			}
			if s.puts != 1+btoi(c.want != "ten") {
				t.Errorf("%d conditional writes", s.puts)
			}
			if data, _, _ := mem.Get("o"); string(data) != c.want {
				t.Errorf("object %q, want %q", data, c.want)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// contended is an ObjectStore whose conditional writes always fail, or
// fail with another error.
type contended struct {
	puts int
	err  error
}

func (*contended) Stat(context.Context, string) (string, fence.Token, error) { return "v", 1, nil }
func (c *contended) PutIf(context.Context, string, []byte, fence.Token, string) error {
	c.puts++
	return c.err
}

// TestPutObjectBounded: a store where someone else always wins gets 8
// conditional writes, then an error wrapping ErrPrecondition; a store
// error is not retried; a cancelled context stops it.
func TestPutObjectBounded(t *testing.T) {
	ctx := t.Context()
	s := &contended{err: fmt.Errorf("412: %w", fence.ErrPrecondition)}
	err := fence.PutObject(ctx, s, "o", 2, nil)
	if !errors.Is(err, fence.ErrPrecondition) || s.puts != 8 || !strings.Contains(err.Error(), "8 attempts") {
		t.Errorf("%d writes: %v", s.puts, err)
	}
	boom := errors.New("503 slow down")
	s = &contended{err: boom}
	if err := fence.PutObject(ctx, s, "o", 2, nil); !errors.Is(err, boom) || s.puts != 1 || !strings.Contains(err.Error(), `fence: writing object "o": `) {
		t.Errorf("%d writes: %v", s.puts, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	s = &contended{}
	if err := fence.PutObject(cancelled, s, "o", 2, nil); !errors.Is(err, context.Canceled) || s.puts != 0 {
		t.Errorf("%d writes: %v", s.puts, err)
	}
	var mem fence.MemStore
	if err := fence.PutObject(cancelled, &mem, "o", 2, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("MemStore: %v", err)
	}
}

// recorded is an ObjectStore that records the tokens of the writes that
// took effect, in the order they did (its lock spans the write and the
// record).
type recorded struct {
	mem    fence.MemStore
	mu     sync.Mutex
	tokens []fence.Token
}

func (r *recorded) Stat(ctx context.Context, name string) (string, fence.Token, error) {
	return r.mem.Stat(ctx, name)
}

func (r *recorded) PutIf(ctx context.Context, name string, data []byte, tok fence.Token, version string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.mem.PutIf(ctx, name, data, tok, version)
	if err == nil {
		r.tokens = append(r.tokens, tok)
	}
	return err
}

// TestPutObjectConcurrentWriters: 8 writers race on one object, 400 writes
// with the tokens 1..400 dealt round the writers (each one's tokens grow,
// neighbours race). The writes that took effect are in strictly increasing
// token order, the object holds the last, each refusal named a higher
// token, and a writer that lost 8 rounds in a row says so with
// ErrPrecondition. Run with -race.
func TestPutObjectConcurrentWriters(t *testing.T) {
	const writers, total = 8, 400
	var s recorded
	var mu sync.Mutex
	var accepted, refused, contended int
	var errs []error
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := w; i < total; i += writers {
				tok := fence.Token(i + 1)
				err := fence.PutObject(t.Context(), &s, "o", tok, []byte(tok.String()))
				var stale *fence.StaleError
				mu.Lock()
				switch {
				case err == nil:
					accepted++
				case errors.As(err, &stale) && stale.Token == tok && stale.Highest > tok:
					refused++
				case errors.Is(err, fence.ErrPrecondition):
					contended++
				default:
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(s.tokens) != accepted || accepted+refused+contended != total || accepted == 0 {
		t.Fatalf("%d writes took effect; %d accepted, %d refused, %d contended of %d", len(s.tokens), accepted, refused, contended, total)
	}
	for i := 1; i < len(s.tokens); i++ {
		if s.tokens[i] <= s.tokens[i-1] {
			t.Fatalf("write %d has token %d after %d", i, s.tokens[i], s.tokens[i-1])
		}
	}
	last := s.tokens[len(s.tokens)-1]
	if data, tok, _ := s.mem.Get("o"); tok != last || string(data) != last.String() {
		t.Errorf("the object holds %q with token %d, the last write was %d", data, tok, last)
	}
	t.Logf("%d writers, %d writes: %d accepted, %d refused, %d gave up after 8 rounds", writers, total, accepted, refused, contended)
}
