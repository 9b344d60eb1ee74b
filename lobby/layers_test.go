package lobby

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPureFilesDoNoIO: the pure half of the package (machine*.go, errors.go,
// doc.go) imports nothing that reads a clock, does I/O, logs or
// synchronises; the Service (service*.go) is the only place that does.
func TestPureFilesDoNoIO(t *testing.T) {
	allowed := map[string]bool{
		"encoding/binary": true, "errors": true, "fmt": true, "maps": true, "slices": true,
		"time": true, "unicode/utf8": true, "cmp": true, "strings": true, "strconv": true, "iter": true,
		"github.com/lobbyhost/lobbyhost/lease":      true,
		"github.com/lobbyhost/lobbyhost/succession": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		pure := strings.HasPrefix(name, "machine") || name == "errors.go" || name == "doc.go"
		if !pure && !strings.HasPrefix(name, "service") {
			t.Errorf("%s: name it machine_*.go (pure) or service_*.go (I/O) so the layer shows", name)
			continue
		}
		if !pure {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[path] {
				t.Errorf("%s imports %s: the pure machine must not read clocks, do I/O, log or lock", name, path)
			}
		}
		// The Time type is fine; reading the clock is not.
		if strings.Contains(string(src), "time.Now(") || strings.Contains(string(src), "time.Since(") {
			t.Errorf("%s reads the wall clock", name)
		}
		checked++
	}
	if checked < 5 {
		t.Fatalf("checked only %d pure files; did the layout change?", checked)
	}
}
