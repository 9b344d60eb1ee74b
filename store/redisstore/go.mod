module github.com/lobbyhost/lobbyhost/store/redisstore

go 1.25.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/lobbyhost/lobbyhost v0.1.0
	github.com/redis/rueidis v1.0.79
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
