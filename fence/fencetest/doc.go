// Package fencetest holds the tests of package fence that need a real
// PostgreSQL server (the SQL guard, under concurrency) and its SQL example.
// It is a module of its own so that the PostgreSQL driver (pgx) never enters
// the library's dependency graph. Its package pgserver starts and stops
// PostgreSQL servers for tests, in this module and in others.
package fencetest
