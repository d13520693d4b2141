package fence

import (
	"context"
	"fmt"
	"strconv"
	"sync"
)

// MemStore is an in-memory ObjectStore, for tests and examples: each write
// gives the object a new version, and PutIf refuses a version that is not
// the current one as S3 and GCS do. The zero value is ready to use and safe
// for concurrent use.
type MemStore struct {
	mu      sync.Mutex
	objects map[string]memObject
	written int64 // writes so far: the last version given
}

type memObject struct {
	data    []byte
	token   Token
	version string
}

// Stat returns the object's version and token ("" and 0 when there is no
// such object).
func (m *MemStore) Stat(ctx context.Context, name string) (string, Token, error) {
	if err := ctx.Err(); err != nil {
		return "", 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.objects[name]
	return o.version, o.token, nil
}

// PutIf stores a copy of data with token if the object's version is version
// ("" for an object that does not exist), and otherwise returns an error
// wrapping ErrPrecondition that names both versions.
func (m *MemStore) PutIf(ctx context.Context, name string, data []byte, token Token, version string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.objects[name].version; cur != version {
		return fmt.Errorf("%w: object %s is at version %q, not %q", ErrPrecondition, shown(name), cur, version)
	}
	if m.objects == nil {
		m.objects = map[string]memObject{}
	}
	m.written++
	m.objects[name] = memObject{data: append([]byte(nil), data...), token: token, version: strconv.FormatInt(m.written, 10)}
	return nil
}

// Get returns a copy of the object's data and its token; ok is false when
// there is no such object.
func (m *MemStore) Get(name string) (data []byte, token Token, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.objects[name]
	return append([]byte(nil), o.data...), o.token, ok
}
