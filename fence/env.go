package fence

import (
	"fmt"
	"os"
)

// EnvVar is the environment variable in which "quorumlock run --fencing"
// gives its command the lease's token.
const EnvVar = "QUORUMLOCK_FENCE"

// FromEnv returns the token in QUORUMLOCK_FENCE. An unset variable is
// ErrNoToken (the command was not started by "quorumlock run --fencing");
// a value that Parse refuses, the empty one included, is ErrInvalid,
// naming the variable and quoting the value.
func FromEnv() (Token, error) {
	s, ok := os.LookupEnv(EnvVar)
	if !ok {
		return 0, fmt.Errorf("%w: %s is not set (quorumlock run sets it with --fencing)", ErrNoToken, EnvVar)
	}
	return parse(EnvVar, s)
}
