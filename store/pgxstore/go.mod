module github.com/lobbyhost/lobbyhost/store/pgxstore

go 1.25.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/jonboulle/clockwork v0.5.0
	github.com/lobbyhost/lobbyhost v0.1.0
)

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
