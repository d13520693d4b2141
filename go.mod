module github.com/quorumlock/quorumlock

go 1.25.0

require (
	github.com/redis/go-redis/v9 v9.17.3
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
