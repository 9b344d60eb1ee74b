package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The page's copy of the browser client is the bundle client/ builds: a Go
// module cannot embed files outside its directory, so the server embeds a
// committed copy, and this test keeps it identical (.ci/client-check
// rebuilds the bundle and checks it against its sources).
func TestPageClientIsTheBuiltBundle(t *testing.T) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	here := filepath.Dir(file)
	dist, err := os.ReadFile(filepath.Join(here, "..", "..", "..", "client", "dist", "lobbyhost-client.js"))
	if err != nil {
		t.Fatalf("the client's bundle: %v", err)
	}
	page, err := os.ReadFile(filepath.Join(here, "static", "lobbyhost-client.js"))
	if err != nil {
		t.Fatalf("the page's copy: %v", err)
	}
	if !bytes.Equal(dist, page) {
		t.Fatalf("static/lobbyhost-client.js (%d bytes) differs from client/dist/lobbyhost-client.js (%d bytes): "+
			"cp client/dist/lobbyhost-client.js examples/wsserver/server/static/", len(page), len(dist))
	}
}
