package node

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/extend.lua
	extendSrc string
	//go:embed scripts/inspect.lua
	inspectSrc string

	acquireScript = redis.NewScript(acquireSrc)
	releaseScript = redis.NewScript(releaseSrc)
	extendScript  = redis.NewScript(extendSrc)
	inspectScript = redis.NewScript(inspectSrc)
)

// scripts lists every Lua script the adapter runs, by name, for LoadScripts.
var scripts = []struct {
	name   string
	script *redis.Script
}{
	{"acquire.lua", acquireScript},
	{"release.lua", releaseScript},
	{"extend.lua", extendScript},
	{"inspect.lua", inspectScript},
}
