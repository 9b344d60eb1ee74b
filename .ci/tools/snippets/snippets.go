package main

import (
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// A Snippet is a Go block of the documentation that users copy. It is
// compiled as the docs show it, in a program of its own, against the
// published modules.
type Snippet struct {
	// Name is the program's directory name.
	Name string
	// Module is the lobbyhost module whose users read the block.
	Module string
	// Doc is the Markdown file, relative to the repository's root, and
	// Heading the heading line the block follows: the first go block after
	// it, before the next heading of the same or a higher level.
	Doc, Heading string
	// Imports are what the surrounding code needs besides the block's own
	// import list.
	Imports []string
	// Params are the enclosing function's parameters: the names the block
	// uses without declaring them. Unused for a block that declares
	// functions.
	Params string
	// Decls are top-level declarations the block uses.
	Decls string
	// After ends the enclosing function; "return nil" when empty.
	After string
}

const (
	core  = "github.com/lobbyhost/lobbyhost"
	pgx   = "github.com/lobbyhost/lobbyhost/store/pgxstore"
	redis = "github.com/lobbyhost/lobbyhost/store/redisstore"
	prom  = "github.com/lobbyhost/lobbyhost/observe/prometheus"
)

// Snippets lists the blocks that are checked. A new Go block in these
// documents that users would copy belongs here.
var Snippets = []Snippet{
	{
		Name: "readme_use", Module: core, Doc: "README.md", Heading: "## Use it",
		Imports: []string{"context", "time"},
		Params:  "ctx context.Context, roomID, userID, otherID string, broadcast func(string, lobby.Event)",
		After:   "return err",
	},
	{
		Name: "readme_storage", Module: core, Doc: "README.md", Heading: "## Storage",
		Imports: []string{"testing", core + "/store", core + "/store/memstore", core + "/storetest"},
		Decls:   "func newIsolatedStore(t *testing.T) store.Store { return memstore.New() }",
	},
	{
		Name: "adapters_conformance", Module: core, Doc: "docs/store-adapters.md", Heading: "## Running the conformance suite",
		Imports: []string{"testing", core + "/store", core + "/store/memstore", core + "/storetest"},
		Decls: "func newIsolatedStore(t *testing.T, opts ...memstore.Option) store.Store { return memstore.New(opts...) }\n" +
			"func withRetention(r store.Retention) memstore.Option { return memstore.WithRetention(r) }",
	},
	{
		Name: "postgres_quickstart", Module: pgx, Doc: "docs/postgres.md", Heading: "## Quick start",
		Imports: []string{"context"},
		Params:  "ctx context.Context",
		After:   "_ = svc\nreturn err",
	},
	{
		Name: "postgres_dbclock", Module: pgx, Doc: "docs/postgres.md", Heading: "### One clock for every process: `DBClock`",
		Imports: []string{"context", "github.com/jackc/pgx/v5/pgxpool", core + "/lobby", pgx},
		Params:  "ctx context.Context, pool *pgxpool.Pool, st *pgxstore.Store",
		After:   "_ = svc\nreturn err",
	},
	{
		Name: "readme_otel", Module: core + "/observe/otel", Doc: "README.md", Heading: "### Traces and metrics with OpenTelemetry",
		Imports: []string{"go.opentelemetry.io/otel/metric", "go.opentelemetry.io/otel/trace", core + "/lobby", core + "/store"},
		Params:  "tracerProvider trace.TracerProvider, meterProvider metric.MeterProvider, st store.Store",
		After:   "_ = svc\nreturn err",
	},
	{
		Name: "redis_quickstart", Module: redis, Doc: "docs/redis.md", Heading: "## Quick start",
		After: "_ = st\nreturn nil",
	},
	{
		Name: "readme_metrics", Module: prom, Doc: "README.md", Heading: "## Metrics",
		After: "_ = svc\nreturn nil",
	},
}

// Block returns the first go block after heading in the Markdown text md,
// and the line number (from 1) of its first line in md.
func Block(md, heading string) (string, int, error) {
	lines := strings.Split(md, "\n")
	level := headingLevel(heading)
	if level == 0 {
		return "", 0, fmt.Errorf("%q is not a Markdown heading", heading)
	}
	found := false
	inGo, inOther := false, false
	var block []string
	first := 0
	for n, l := range lines {
		if !found {
			if strings.TrimRight(l, " ") == heading {
				found = true
			}
			continue
		}
		t := strings.TrimSpace(l)
		switch {
		case inGo && t == "```":
			return strings.Join(block, "\n") + "\n", first, nil
		case inGo:
			block = append(block, l)
		case inOther:
			inOther = t != "```"
		case t == "```go":
			inGo, first = true, n+2
		case strings.HasPrefix(t, "```"):
			inOther = true
		default:
			if h := headingLevel(l); h > 0 && h <= level {
				return "", 0, fmt.Errorf("no go block under %q", heading)
			}
		}
	}
	if !found {
		return "", 0, fmt.Errorf("no heading %q", heading)
	}
	return "", 0, fmt.Errorf("no go block under %q", heading)
}

func headingLevel(l string) int {
	n := 0
	for n < len(l) && l[n] == '#' {
		n++
	}
	if n == 0 || n >= len(l) || l[n] != ' ' {
		return 0
	}
	return n
}

var (
	importSpec  = regexp.MustCompile(`^\s*(?:[\w.]+\s+)?"[^"]+"\s*$`)
	placeholder = regexp.MustCompile(`\{ \.\.\. \}`)
)

// Program turns a block into a main package that compiles exactly when the
// block does. The block's import list moves to the file's import list; an
// error check written `{ ... }` ("handle it") becomes `{ return err }`; a
// block of statements becomes the body of a function with s.Params, a block
// of declarations stays at top level. Nothing else of the block changes.
//
// With line > 0 (the block's first line in s.Doc), each line of the block
// is preceded by a //line directive, so that the compiler reports errors at
// their place in the document; the program is then left unformatted (gofmt
// would indent the directives, and the compiler reads them only at the start
// of a line).
func Program(s Snippet, block string, line int) ([]byte, error) {
	imports := map[string]bool{}
	for _, i := range s.Imports {
		imports[fmt.Sprintf("%q", i)] = true
	}
	lines := strings.Split(strings.TrimRight(block, "\n"), "\n")
	var body []string
	var at []int // each body line's index in the block
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimSpace(l)
		switch {
		case t == "import (":
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ")"; i++ {
				if spec := strings.TrimSpace(lines[i]); spec != "" {
					if !importSpec.MatchString(spec) {
						return nil, fmt.Errorf("cannot read import %q", spec)
					}
					imports[spec] = true
				}
			}
			if i == len(lines) {
				return nil, fmt.Errorf("unterminated import list")
			}
		case strings.HasPrefix(t, "import \""):
			imports[strings.TrimPrefix(t, "import ")] = true
		default:
			body = append(body, placeholder.ReplaceAllString(l, "{ return err }"))
			at = append(at, i)
		}
	}
	var specs []string
	for i := range imports {
		specs = append(specs, i)
	}
	sort.Strings(specs)

	var b strings.Builder
	fmt.Fprintf(&b, "// Code generated by .ci/tools/snippets from %s (the go block under %q). DO NOT EDIT.\n\n", s.Doc, s.Heading)
	b.WriteString("package main\n\nimport (\n")
	for _, i := range specs {
		b.WriteString("\t" + i + "\n")
	}
	b.WriteString(")\n\n")
	if s.Decls != "" {
		b.WriteString(s.Decls + "\n\n")
	}
	for len(body) > 0 && strings.TrimSpace(body[0]) == "" {
		body, at = body[1:], at[1:]
	}
	code := strings.Join(body, "\n")
	topLevel := strings.HasPrefix(strings.TrimSpace(code), "func ")
	if line > 0 {
		var withLines []string
		for i, l := range body {
			withLines = append(withLines, fmt.Sprintf("//line %s:%d", s.Doc, line+at[i]), l)
		}
		code = strings.Join(withLines, "\n")
	}
	if topLevel {
		b.WriteString(code + "\n\n")
	} else {
		after := s.After
		if after == "" {
			after = "return nil"
		}
		fmt.Fprintf(&b, "func snippet(%s) error {\n%s\n%s\n}\n\nvar _ = snippet\n\n", s.Params, code, after)
	}
	b.WriteString("func main() {}\n")
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		return nil, fmt.Errorf("%s under %q does not parse as Go: %w\n%s", s.Doc, s.Heading, err, b.String())
	}
	if line > 0 {
		return []byte(b.String()), nil
	}
	return src, nil
}

// Write writes a program for each of the module's snippets into its own
// directory under out and returns their names.
func Write(root, out, module string) ([]string, error) {
	var names []string
	for _, s := range Snippets {
		if s.Module != module {
			continue
		}
		md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(s.Doc)))
		if err != nil {
			return nil, err
		}
		block, line, err := Block(string(md), s.Heading)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Doc, err)
		}
		src, err := Program(s, block, line)
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(out, s.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
			return nil, err
		}
		names = append(names, s.Name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no snippet for module %s", module)
	}
	return names, nil
}
