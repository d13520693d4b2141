package fence

import (
	"context"
	"errors"
	"fmt"
)

// ErrPrecondition: an ObjectStore refused a conditional write because the
// object's version was no longer the one given (S3 and GCS answer 412
// Precondition Failed). PutObject retries on it.
var ErrPrecondition = errors.New("fence: precondition failed: the object changed")

// ObjectStore is an object store that writes conditionally: what PutObject
// needs from S3, GCS or MemStore. The object's fencing token is stored with
// it (S3 user metadata, GCS custom metadata); its version is what the store
// compares (an ETag for S3's If-Match, a generation for GCS's
// ifGenerationMatch). docs/fencing.md shows both.
type ObjectStore interface {
	// Stat returns the object's version and the token stored with it. An
	// object that does not exist is version "" and token 0, without error.
	Stat(ctx context.Context, name string) (version string, token Token, err error)
	// PutIf writes data and token as the object only if its version is
	// still version (for "": only if it does not exist), and otherwise
	// returns an error that wraps ErrPrecondition.
	PutIf(ctx context.Context, name string, data []byte, token Token, version string) error
}

// putAttempts bounds PutObject's compare-and-swap rounds.
const putAttempts = 8

// PutObject writes data as the object name with token, unless the object
// carries a higher token: then it returns a *StaleError (ErrStale) naming
// both. It reads the object's token and version (Stat), compares, and
// writes on the condition that the version has not changed (PutIf); when
// another writer came in between (ErrPrecondition) it starts again, at most
// 8 times, and then returns an error wrapping ErrPrecondition. A token equal
// to the object's is accepted (the same lease writing again); a token below
// 1 is ErrInvalid. Deleting an object forgets its token.
func PutObject(ctx context.Context, s ObjectStore, name string, token Token, data []byte) error {
	if err := token.check(); err != nil {
		return err
	}
	var last error
	for range putAttempts {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("fence: writing object %s: %w", shown(name), err)
		}
		version, highest, err := s.Stat(ctx, name)
		if err != nil {
			return fmt.Errorf("fence: reading object %s: %w", shown(name), err)
		}
		if highest > token {
			return &StaleError{Resource: name, Token: token, Highest: highest}
		}
		err = s.PutIf(ctx, name, data, token, version)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrPrecondition) {
			return fmt.Errorf("fence: writing object %s: %w", shown(name), err)
		}
		last = err
	}
	return fmt.Errorf("fence: object %s changed during each of %d attempts to write token %d: %w", shown(name), putAttempts, token, last)
}
