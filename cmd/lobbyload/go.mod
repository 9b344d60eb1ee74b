module github.com/lobbyhost/lobbyhost/cmd/lobbyload

go 1.25.0

require github.com/coder/websocket v1.8.15
