# quorumlock: make test installs what the tests need (when root) and runs them.
SHELL := /bin/bash
GO ?= go

.PHONY: test deps vet fmt-check bench

test: deps fmt-check vet
	$(GO) test -race -count=1 -timeout 20m ./...

# deps installs redis-server and libfaketime with apt when they are missing
# and we are root; otherwise it says what to install.
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing="$$missing libfaketime"; \
	command -v faketime >/dev/null 2>&1 || missing="$$missing faketime"; \
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
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 6 ./redlock/ ./bench/ 2>/dev/null
