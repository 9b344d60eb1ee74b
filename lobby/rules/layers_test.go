package rules

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRulesDoNoIO: package rules imports nothing that reads a clock, does
// I/O, logs or synchronises, and never reads the wall clock; time is always
// an argument. The compiler already keeps it from reaching the Service; this
// keeps it from reaching a store, a clock or a logger of its own.
func TestRulesDoNoIO(t *testing.T) {
	allowed := map[string]bool{
		"encoding/binary": true, "errors": true, "fmt": true, "maps": true, "slices": true,
		"time": true, "unicode/utf8": true, "cmp": true, "strings": true, "strconv": true,
		"github.com/lobbyhost/lobbyhost/lease":      true,
		"github.com/lobbyhost/lobbyhost/succession": true,
		"bytes": true, "iter": true,
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
				t.Errorf("%s imports %s: the rules must not read clocks, do I/O, log or lock", name, path)
			}
		}
		// The Time type is fine; reading the clock is not.
		if strings.Contains(string(src), "time.Now(") || strings.Contains(string(src), "time.Since(") {
			t.Errorf("%s reads the wall clock", name)
		}
		checked++
	}
	if checked < 5 {
		t.Fatalf("checked only %d files; did the layout change?", checked)
	}
}
