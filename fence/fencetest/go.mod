module github.com/quorumlock/quorumlock/fence/fencetest

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/quorumlock/quorumlock v0.0.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.42.0 // indirect
)

replace github.com/quorumlock/quorumlock v0.0.0 => ../..
