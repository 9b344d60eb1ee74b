package pgxstore

import (
	"os"
	"strings"
	"testing"
)

// TestDocsShowTheSchema keeps the DDL printed in docs/postgres.md equal to
// what Migrate runs.
func TestDocsShowTheSchema(t *testing.T) {
	doc, err := os.ReadFile("../../docs/postgres.md")
	if err != nil {
		t.Fatalf("reading the PostgreSQL docs: %v", err)
	}
	s, err := New(lazyPool(t, exampleDSN))
	if err != nil {
		t.Fatal(err)
	}
	want := "```sql\n" + s.MigrationSQL() + "```\n"
	if !strings.Contains(string(doc), want) {
		t.Errorf("docs/postgres.md does not show MigrationSQL() for the default schema verbatim; want this block:\n%s", want)
	}
}
