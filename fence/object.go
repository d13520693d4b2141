package fence

import (
	"context"
	"errors"
	"fmt"
)

// ErrPrecondition means that an ObjectStore refused a conditional write
// because the object's version was no longer the one given (S3 and GCS
// answer 412 Precondition Failed). PutObject retries on it.
var ErrPrecondition = errors.New("fence: precondition failed: the object changed")

// ObjectStore is an object store that writes conditionally: what PutObject
// needs from S3, GCS or MemStore. The object's fencing token is stored with
// it, as metadata; its version is what the store compares. An
// implementation is a few lines over the store's own client (docs/fencing.md
// has both in full, with no SDK needed here):
//
//   - S3: Stat is HeadObject: the ETag as version, the user metadata
//     "quorumlock-fence" (header x-amz-meta-quorumlock-fence) through Parse
//     as token; 404 Not Found is "", 0. PutIf is PutObject with that
//     metadata and If-Match: version, or If-None-Match: * for version "";
//     412 Precondition Failed and 409 ConditionalRequestConflict wrap
//     ErrPrecondition.
//   - GCS: Stat reads the object's attributes: the generation (decimal) as
//     version, the custom metadata "quorumlock-fence" as token; no object is
//     "", 0. PutIf writes with that metadata and the precondition
//     ifGenerationMatch=version (ifGenerationMatch=0 for version ""); 412
//     wraps ErrPrecondition.
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
