package fence

import (
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrNoToken: no token where one was looked for (an unset environment
	// variable, a request without the header).
	ErrNoToken = errors.New("fence: no token")
	// ErrInvalid: text that is not a token (not a decimal integer from 1 to
	// 2^63-1, several header values), or a token below 1 given to a guard.
	ErrInvalid = errors.New("fence: invalid token")
	// ErrStale: a guard refused a token below the highest the resource has
	// seen. The error is a *StaleError.
	ErrStale = errors.New("fence: stale token")
)

// StaleError is a guard's refusal of a token below the highest the resource
// has seen. It wraps ErrStale.
type StaleError struct {
	// Resource is the guarded resource (a SQL guard's resource, an object's
	// name, a Redis key).
	Resource string
	// Token is the refused token, Highest the resource's high-water mark
	// (above Token).
	Token, Highest Token
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: stale token %d for %s: the resource has seen %d", e.Token, shown(e.Resource), e.Highest)
}

// Unwrap returns ErrStale.
func (e *StaleError) Unwrap() error { return ErrStale }

// shown quotes s for an error message, cut to 64 bytes.
func shown(s string) string {
	const limit = 64
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:limit]) + fmt.Sprintf("... (%d bytes)", len(s))
}
