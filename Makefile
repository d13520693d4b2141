# quorumlock: make test installs what the tests need (when root) and runs the
# tests of every module: the library (root), the operator's command
# (cmd/quorumlock), faultinject/, bench/, the observer adapters
# (observe/redlockprometheus, observe/redlockotel), the fence guard's
# PostgreSQL tests (fence/fencetest), and a small bounded model check of
# the protocol (test-model; make model checks every configuration,
# docs/verification.md).
# Each module is built, vetted and tested on its own (GOWORK=off: go.work is
# the development workspace, not something a module needs to build).
SHELL := /bin/bash
GO ?= go
ADAPTERS := observe/redlockprometheus observe/redlockotel
MODULES := . cmd/quorumlock faultinject bench fence/fencetest $(ADAPTERS)
export GOWORK := off

.PHONY: test test-lib test-cmd test-faultinject test-bench test-adapters test-fence test-model model-harness model deps vet staticcheck fmt-check bench chaos simulate

test: deps fmt-check vet staticcheck test-model test-lib test-cmd test-fence test-faultinject test-bench test-adapters

test-lib:
	$(GO) test -race -count=1 -timeout 20m ./...

# cmd/quorumlock is a module of its own, so that the operator's binary links
# neither the chaos harness (containers, proxies, in-memory masters) nor the
# benchmark's peers: its tests run run, status and doctor on redis-server
# processes. (Its behaviour under the harness's own faults, a clock stepped
# at boot and a full disk, is tested in faultinject/operatortest.)
test-cmd:
	cd cmd/quorumlock && $(GO) test -race -count=1 -timeout 20m ./...

# faultinject's packages run one at a time (-p 1): chaos and faultinject both
# start containers and restart masters, and on two cores running them side by
# side only slows both. The chaos short suite runs on every backend here
# (a plain go test runs it on the best one only).
test-faultinject:
	cd faultinject && QUORUMLOCK_CHAOS_BACKENDS=all $(GO) test -race -count=1 -p 1 -timeout 30m ./...

# The adapters are modules of their own, so that the library's dependency
# graph never holds client_golang or OpenTelemetry.
test-adapters:
	@set -e; for m in $(ADAPTERS); do echo "go test ($$m)"; (cd $$m && $(GO) test -race -count=1 -timeout 5m ./...); done

# fence/fencetest is a module of its own (the pgx driver stays out of the
# library): the SQL guard's tests on a PostgreSQL server it starts.
test-fence:
	cd fence/fencetest && $(GO) test -race -count=1 -timeout 10m ./...

# bench's tests include a smoke run of every benchmark (one iteration each).
test-bench:
	cd bench && $(GO) test -count=1 -timeout 10m ./...

# test-model runs the quick model configurations (model/check.sh quick:
# about four minutes for 46 configurations, most of it compiling verifiers), then checks the
# harness itself (model-harness).
test-model:
	model/check.sh quick
	@$(MAKE) --no-print-directory model-harness

# model-harness: a configuration that must pass, run with a mechanism
# switched off (FLAGS=-DNO_DRIFT), must make check.sh fail with status 1 and
# name safe-quick as the configuration that did not give what it must. That
# failure is the expected result: its output is kept out of the log (it
# reads as a failure) and shown only when the check itself fails.
model-harness:
	@out=$$(mktemp -d); rc=0; log=$$(FLAGS=-DNO_DRIFT OUT=$$out model/check.sh safe-quick 2>&1) || rc=$$?; rm -rf $$out; \
	if [ $$rc -eq 1 ] && printf '%s\n' "$$log" | grep -q '^safe-quick .*<-- want: pass'; then \
		echo "harness check: safe-quick with NO_DRIFT failed as it must (model/check.sh exit 1: the drift allowance switched off gives a counterexample)"; \
	else \
		printf '%s\n' "$$log"; \
		echo "harness check FAILED: model/check.sh safe-quick with FLAGS=-DNO_DRIFT gave exit $$rc, want 1 with safe-quick marked '<-- want: pass'" >&2; exit 1; \
	fi

# model checks every configuration of the model (docs/verification.md):
# the protected protocol, each documented unsafe condition and each
# mechanism switched off: 6 to 11 minutes on 2 cores (36 configurations,
# docs/verification.md has each one's figures); MEMLIM (MB) bounds
# each verifier's memory (make model MEMLIM=6000). make deps installs spin.
model:
	model/check.sh

# deps installs redis-server (with redis-cli and redis-check-aof),
# libfaketime, spin and gcc (model/check.sh), postgresql (fence/fencetest,
# the chaos suite's -pg scenarios), and nftables and iproute2 (the one-way
# partition's network namespaces) with apt when they are missing and we are
# root; otherwise it says what to install.
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing="$$missing libfaketime"; \
	command -v faketime >/dev/null 2>&1 || missing="$$missing faketime"; \
	command -v spin >/dev/null 2>&1 || missing="$$missing spin"; \
	command -v gcc >/dev/null 2>&1 || missing="$$missing gcc"; \
	command -v nft >/dev/null 2>&1 || missing="$$missing nftables"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "make: installing$$missing with apt-get"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$$missing >/dev/null || exit 1; \
		else \
			echo "make: missing$$missing; install them (Debian/Ubuntu: sudo apt-get install -y$$missing) and re-run" >&2; \
			exit 1; \
		fi; \
	fi

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	@set -e; for m in $(MODULES); do echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...); done

# staticcheck runs a pinned release through the Go module proxy (no install
# step; the first run downloads and builds it), with every check, the style
# checks included (staticcheck.conf).
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
staticcheck:
	@set -e; for m in $(MODULES); do echo "staticcheck ($$m)"; (cd $$m && $(STATICCHECK) ./...); done

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./redlock/

# chaos runs the full suite (30 s per scenario) at N=3 and N=5 on the best
# backend; BACKEND=process|docker|memory picks one.
BACKEND ?= auto
chaos:
	cd faultinject && $(GO) run ./cmd/chaos --nodes 3,5 --backend $(BACKEND)

# simulate runs the deterministic simulator on SCHEDULES schedules from SEED
# (docs/simulation.md); a failing seed is printed with its replay command.
SCHEDULES ?= 100000
SEED ?= 1
simulate:
	cd faultinject && $(GO) run ./cmd/simulate --schedules $(SCHEDULES) --seed $(SEED)
