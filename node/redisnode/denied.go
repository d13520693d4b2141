package redisnode

import (
	"crypto/sha1"
	"encoding/hex"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

// deniedError is a call the server denied: it wraps redlock.ErrNodeDenied
// and the reply, and redlock.ErrNotSent when the command was refused before
// it ran (so it had no effect and needs no release). Its text names the
// node, what the server refused (the command, or the keys it may have
// refused, with the script and line for a command inside one of our
// scripts) and the reply: "redlock: node denied access: host:port: refused
// GET (acquire.lua line 24): ERR The user executing the script can't ...".
type deniedError struct {
	addr    string
	reply   error
	notSent bool
	// keys are the call's keys (nil when it has none or they are unknown);
	// the text names them when the server refused one of them.
	keys []string
}

func (e *deniedError) Error() string {
	var b strings.Builder
	b.WriteString(redlock.ErrNodeDenied.Error())
	b.WriteString(": ")
	b.WriteString(e.addr)
	b.WriteString(": ")
	if what := refused(e.reply.Error(), e.keys); what != "" {
		b.WriteString("refused ")
		b.WriteString(what)
		b.WriteString(": ")
	}
	b.WriteString(e.reply.Error())
	return b.String()
}

func (e *deniedError) Unwrap() []error {
	if e.notSent {
		return []error{redlock.ErrNodeDenied, e.reply, redlock.ErrNotSent}
	}
	return []error{redlock.ErrNodeDenied, e.reply}
}

// withKeys returns err with keys, the keys of the call that failed with it,
// recorded when err is a denial (its text then names them if the server
// refused one of them); any other err is returned as it is. Call it only
// when err is not nil: keys is not copied.
func withKeys(err error, keys []string) error {
	if d, ok := err.(*deniedError); ok && d.keys == nil {
		d.keys = keys
	}
	return err
}

// evalKeys returns the keys of an EVAL or EVALSHA command's arguments
// (command, script, number of keys, keys..., arguments...), given as
// strings or *strings (see lockArgs); nil when they cannot be read.
func evalKeys(args []any) []string {
	if len(args) < 3 {
		return nil
	}
	s, ok := args[2].(string)
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || 3+n > len(args) {
		return nil
	}
	keys := make([]string, 0, n)
	for _, a := range args[3 : 3+n] {
		switch k := a.(type) {
		case string:
			keys = append(keys, k)
		case *string:
			keys = append(keys, *k)
		default:
			return nil
		}
	}
	return keys
}

// denied reports whether a Redis error reply refuses the call for a reason
// that retrying cannot mend: no or a wrong password, or an ACL user without
// the permission, for the command or its keys (NOPERM) or for a command
// inside a script (Redis 7.0: "ERR The user executing the script can't run
// this command ..." or "... can't access at least one of the keys ...";
// later versions: "... ACL failure in script: ...").
func denied(rerr redis.Error) bool {
	msg := rerr.Error()
	for _, prefix := range []string{"NOAUTH ", "WRONGPASS ", "NOPERM "} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return strings.Contains(msg, "The user executing the script can't") || strings.Contains(msg, "ACL failure in script")
}

// unexecuted reports whether a denial refused the command itself before it
// ran: a failed authentication, or an ACL refusal of the command or its keys
// (not of a command inside a script, which may follow writes the script
// already made).
func unexecuted(rerr redis.Error) bool {
	return !strings.Contains(rerr.Error(), "script")
}

var (
	// quotedCommand finds the command a reply names: "... run the 'evalsha'
	// command".
	quotedCommand = regexp.MustCompile(`'([A-Za-z|_-]+)' command`)
	// scriptLine finds the script and line of an error raised inside a
	// script: "script: <sha1>, on @user_script:<line>."
	scriptLine = regexp.MustCompile(`script: ([0-9a-f]{40}), on @user_script:([0-9]+)`)
	// luaCall finds the commands a line of a script calls, luaKey the KEYS
	// it names.
	luaCall = regexp.MustCompile(`redis\.p?call\(\s*['"]([A-Za-z]+)['"]`)
	luaKey  = regexp.MustCompile(`KEYS\[([0-9]+)\]`)
)

// refused says what a denial reply refused, for its error: the command
// ("EVALSHA"), "one of the keys ..." (keys, the call's keys, when known) or
// "one of the channels", and for a refusal inside one of the package's
// scripts, the commands of the script's line ("GET (acquire.lua line 24)"),
// and the key that line names when it names one. "" for a failed
// authentication (the reply says it all).
func refused(reply string, keys []string) string {
	if !strings.HasPrefix(reply, "NOPERM ") && !strings.Contains(reply, "script") {
		return "" // NOAUTH, WRONGPASS
	}
	var cmds []string
	if m := quotedCommand.FindStringSubmatch(reply); m != nil {
		cmds = []string{strings.ToUpper(m[1])}
	}
	where, lineKeys := "", []string(nil)
	if m := scriptLine.FindStringSubmatch(reply); m != nil {
		if s, ok := scriptsBySHA()[m[1]]; ok {
			line, _ := strconv.Atoi(m[2])
			where = s.name + " line " + m[2]
			if line >= 1 && line <= len(s.lines) {
				text := s.lines[line-1]
				if cmds == nil {
					for _, c := range luaCall.FindAllStringSubmatch(text, -1) {
						cmds = append(cmds, strings.ToUpper(c[1]))
					}
				}
				for _, k := range luaKey.FindAllStringSubmatch(text, -1) {
					if i, err := strconv.Atoi(k[1]); err == nil && i >= 1 && i <= len(keys) {
						lineKeys = append(lineKeys, keys[i-1])
					}
				}
			}
		} else {
			where = "script " + m[1][:12] + " line " + m[2]
		}
	}
	var b strings.Builder
	switch {
	case strings.Contains(reply, "one of the keys") || strings.Contains(reply, "of the keys mentioned"):
		if len(cmds) > 0 {
			b.WriteString("a key of ")
			b.WriteString(strings.Join(cmds, " or "))
		} else {
			b.WriteString("a key")
		}
		if len(lineKeys) == 0 {
			lineKeys = keys
		}
		if len(lineKeys) > 0 {
			b.WriteString(", one of ")
			for i, k := range lineKeys {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(quote(k))
			}
		}
	case strings.Contains(reply, "channel"):
		b.WriteString("a channel")
		if len(cmds) > 0 {
			b.WriteString(" of ")
			b.WriteString(strings.Join(cmds, " or "))
		}
	case len(cmds) > 0:
		b.WriteString(strings.Join(cmds, " or "))
	default:
		b.WriteString("a command")
	}
	if where != "" {
		b.WriteString(" (")
		b.WriteString(where)
		b.WriteString(")")
	}
	return b.String()
}

// embeddedScript is one of the package's scripts, for naming the command a
// denial inside it refused.
type embeddedScript struct {
	name  string   // its file name, acquire.lua
	lines []string // its source, line by line
}

// scriptsBySHA indexes the package's scripts (Scripts) by the SHA-1 digest
// EVALSHA names them by, which a reply raised inside a script quotes.
var scriptsBySHA = sync.OnceValue(func() map[string]embeddedScript {
	out := map[string]embeddedScript{}
	names, _ := fs.Glob(Scripts, "scripts/*.lua")
	for _, name := range names {
		src, err := fs.ReadFile(Scripts, name)
		if err != nil {
			continue
		}
		sum := sha1.Sum(src)
		out[hex.EncodeToString(sum[:])] = embeddedScript{name: path.Base(name), lines: strings.Split(string(src), "\n")}
	}
	for sha, c := range checkedNames {
		out[sha] = embeddedScript{name: c.name, lines: strings.Split(c.src, "\n")}
	}
	return out
})
