// Package operatortest runs the operator's quorumlock command (the
// cmd/quorumlock module at the repository's root, which links none of this
// harness) against masters under faults only this harness makes: a clock
// stepped at a master's boot (libfaketime, package clockskew) and a full
// disk (DiskFull, on a tmpfs). Its tests build the command from the
// checkout with go build and run it as an operator would; the package
// has no code of its own.
package operatortest
