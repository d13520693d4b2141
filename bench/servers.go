package bench

import (
	"errors"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// StartServers starts n redis-server processes (from PATH, on free loopback
// ports, no persistence) and returns their addresses and a function that
// stops them all. It fails with an error wrapping redisproc.ErrNoBinary
// when redis-server is not installed.
func StartServers(n int) (addrs []string, stop func() error, err error) {
	var servers []*redisproc.Server
	stop = func() error {
		var errs []error
		for _, s := range servers {
			errs = append(errs, s.Stop())
		}
		return errors.Join(errs...)
	}
	for range n {
		s, err := redisproc.Start(redisproc.Config{})
		if err != nil {
			return nil, nil, errors.Join(err, stop())
		}
		servers = append(servers, s)
		addrs = append(addrs, s.Addr())
	}
	return addrs, stop, nil
}
