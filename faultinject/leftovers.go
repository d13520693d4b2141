package faultinject

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

// Leftovers counts what the cluster labelled label has running or on disk,
// without removing anything: redis-server processes whose command line
// names the label, containers labelled with it (when a Docker engine
// answers), its temporary directories (a master's tmpfs, Config.Tmpfs, is
// mounted on one) and its network namespaces (Config.Netns). After Close it is 0; a crashed
// run's leftovers are removed with RemoveDockerLeftovers (containers) or by
// hand. The error says what could not be checked.
func Leftovers(ctx context.Context, label string) (int, error) {
	if err := checkName("label", label); err != nil {
		return 0, err
	}
	n := 0
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range cmdlines {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), label) && strings.Contains(string(b), "redis") {
			n++
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "*"+label+"-node*"))
	n += len(dirs)
	namespaces, _ := filepath.Glob(filepath.Join("/run/netns", label+"-node*"))
	n += len(namespaces)
	if dockerAvailable(ctx) != nil {
		return n, nil
	}
	pool, err := dockertest.NewPool("")
	if err != nil {
		return n, fmt.Errorf("faultinject: docker client: %w", err)
	}
	defer closeIdle(pool)
	cs, err := pool.Client.ListContainers(dc.ListContainersOptions{All: true,
		Filters: map[string][]string{"label": {dockerLabel + "=1", dockerLabelCluster + "=" + label}}, Context: ctx})
	if err != nil {
		return n, fmt.Errorf("faultinject: docker: listing containers of %s: %w", label, err)
	}
	return n + len(cs), nil
}
