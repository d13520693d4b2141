package redlock_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/redisproc"
)

// TestReadmeQuickStartRunsOnRealServers builds the README's quick start, as
// written (its imports and its code as the body of a function returning an
// error), into a program of its own, against three redis-server processes
// standing for redis-1, redis-2 and redis-3 (the first with the ACL user
// locker:secret its URL names), and runs it: it must print what the README
// says it prints.
func TestReadmeQuickStartRunsOnRealServers(t *testing.T) {
	redisproc.Require(t)
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds the README's program")
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Quick start\n")
	require.True(t, ok, "README.md has a Quick start section")
	_, code, ok := strings.Cut(section, "```go\n")
	require.True(t, ok)
	code, _, ok = strings.Cut(code, "\n```\n")
	require.True(t, ok)
	imports, body, ok := strings.Cut(code, "\n)\n")
	require.True(t, ok && strings.HasPrefix(imports, "import ("), "the quick start opens with its imports")
	_, printed, ok := strings.Cut(section, "It prints:\n\n```\n")
	require.True(t, ok, "the README says what the quick start prints")
	printed, _, _ = strings.Cut(printed, "```\n")

	ctx := context.Background()
	var admin *redis.Client // master 1's, whose user locker has docs/nodes.md's minimal ACL
	for i := range 3 {
		srv := redisproc.StartT(t, redisproc.Config{})
		host := "redis-" + string(rune('1'+i)) + ":6379"
		require.Contains(t, body, host)
		body = strings.ReplaceAll(body, host, srv.Addr())
		if i == 0 {
			admin = redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2, DisableIdentity: true})
			t.Cleanup(func() { _ = admin.Close() })
			nodes, err := os.ReadFile(filepath.Join(repoRoot, "docs", "nodes.md"))
			require.NoError(t, err)
			_, acl, ok := strings.Cut(string(nodes), "\nACL SETUSER locker on >PASSWORD ")
			require.True(t, ok, "docs/nodes.md has the minimal ACL")
			acl, _, _ = strings.Cut(acl, "\n")
			args := []any{"ACL", "SETUSER", "locker", "on", ">secret"}
			for _, f := range strings.Fields(acl) {
				args = append(args, f)
			}
			require.NoError(t, admin.Do(ctx, args...).Err())
		}
	}

	dir := t.TempDir()
	root, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	mod := "module example.com/quickstart\n\ngo 1.26.0\n\nrequire github.com/quorumlock/quorumlock v0.0.0\n\nreplace github.com/quorumlock/quorumlock v0.0.0 => " + root + "\n"
	prog := "package main\n\n" + imports + "\n)\n\nfunc quickStart() error {\n" + body + "\n}\n\nfunc main() {\n\tif err := quickStart(); err != nil {\n\t\tlog.Fatal(err)\n\t}\n}\n"
	for name, data := range map[string]string{"go.mod": mod, "go.sum": string(sum), "main.go": prog} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	run := func(args ...string) string {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		require.NoError(t, cmd.Run(), "go %s:\n%s\nprogram:\n%s", strings.Join(args, " "), errb.String(), prog)
		return out.String()
	}
	run("mod", "tidy")
	require.Equal(t, printed, run("run", "."))
	// Masters 2 and 3 are a quorum without master 1: that its user was
	// never refused a key (a lock name outside the ACL's patterns) nor a
	// command shows that the quick start's name and docs/nodes.md's ACL
	// agree. The one refusal the ACL means: the release's PUBLISH (a
	// redis.pcall; without channel permissions nobody is notified).
	entries, err := admin.Do(ctx, "ACL", "LOG").Slice()
	require.NoError(t, err)
	for _, e := range entries {
		kv, _ := e.([]any)
		fields := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			fields[fmt.Sprint(kv[i])] = kv[i+1]
		}
		if fields["reason"] != "command" || fields["object"] != "publish" {
			t.Errorf("master 1 refused user locker (docs/nodes.md's minimal ACL) what the quick start asked: %v", fields)
		}
	}
}
