// Package faults is lobbyhost's fault harness: three example-server
// processes on one shared store (PostgreSQL or Redis), each in its own
// network namespace joined to the root namespace by two veth pairs, one
// towards its clients and one towards the store, so that either can be cut
// and healed on its own. A driver in the root namespace plays scripted-random
// joins, closes, second tabs, transfers and kicks on a few lobbies; every
// host acts on a fenced resource with the term it last saw; faults (store
// cut, client cut, SIGSTOP past the session TTL, kill -9, store restart,
// netem delay and loss, one process's clock offset) are scheduled at random
// points, sometimes two at once; and the whole history is handed to package
// history for checking.
//
// It needs root and iproute2 (ip netns, tc netem), a PostgreSQL server on
// 127.0.0.1:5432 for the PostgreSQL runs, and redis-server on the PATH for
// the Redis runs (the harness starts its own Redis on a port of its own, so
// restarting it disturbs no one). See docs/reliability.md.
package faults
