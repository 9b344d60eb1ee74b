module github.com/lobbyhost/lobbyhost

go 1.25.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/google/go-cmp v0.7.0
	github.com/jonboulle/clockwork v0.5.0
	pgregory.net/rapid v1.3.0
)
