package main

import (
	"strings"
	"testing"
)

const doc = "# Title\n\n## Use it\n\nText.\n\n```sh\n# not a heading\ngo get x\n```\n\n```go\nimport (\n\t\"example.com/x\"\n\tname \"example.com/y\"\n)\n\nv, err := x.New()\nif err != nil { ... }\n_ = name.Z(v)\n```\n\n```go\nsecond()\n```\n\n## Empty\n\nNo code.\n\n## Next\n\n### Deeper\n\n```go\ndeeper()\n```\n"

func TestBlockTakesTheFirstGoBlockUnderTheHeading(t *testing.T) {
	got, line, err := Block(doc, "## Use it")
	if err != nil {
		t.Fatal(err)
	}
	if line != 13 {
		t.Errorf("Block's first line = %d, want 13", line)
	}
	want := "import (\n\t\"example.com/x\"\n\tname \"example.com/y\"\n)\n\nv, err := x.New()\nif err != nil { ... }\n_ = name.Z(v)\n"
	if got != want {
		t.Errorf("Block = %q, want %q", got, want)
	}
}

func TestBlockStopsAtTheNextHeadingOfTheSameLevel(t *testing.T) {
	if _, _, err := Block(doc, "## Empty"); err == nil || !strings.Contains(err.Error(), "no go block") {
		t.Errorf("Block under a section without code: err = %v, want no go block", err)
	}
	if got, _, err := Block(doc, "### Deeper"); err != nil || got != "deeper()\n" {
		t.Errorf("Block(### Deeper) = %q, %v", got, err)
	}
	if _, _, err := Block(doc, "## Missing"); err == nil || !strings.Contains(err.Error(), "no heading") {
		t.Errorf("Block under a missing heading: err = %v", err)
	}
}

func TestProgramKeepsTheBlockAndFillsOnlyThePlaceholder(t *testing.T) {
	block, _, err := Block(doc, "## Use it")
	if err != nil {
		t.Fatal(err)
	}
	src, err := Program(Snippet{Doc: "d.md", Heading: "## Use it", Imports: []string{"context"}, Params: "ctx context.Context", After: "_ = ctx\nreturn nil"}, block, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"import (\n\t\"context\"\n\t\"example.com/x\"\n\tname \"example.com/y\"\n)",
		"func snippet(ctx context.Context) error {\n\tv, err := x.New()\n\tif err != nil {\n\t\treturn err\n\t}\n\t_ = name.Z(v)\n\t_ = ctx\n\treturn nil\n}",
		"func main() {}",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("program lacks %q:\n%s", want, src)
		}
	}
}

func TestProgramKeepsDeclarationsAtTopLevel(t *testing.T) {
	src, err := Program(Snippet{Decls: "func helper() int { return 1 }"}, "func TestX(t *testing.T) {\n\t_ = helper()\n}\n", 3)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "\nfunc TestX(t *testing.T) {") || strings.Contains(string(src), "func snippet(") {
		t.Errorf("a block of declarations was wrapped in a function:\n%s", src)
	}
}

func TestProgramRefusesWhatDoesNotParse(t *testing.T) {
	if _, err := Program(Snippet{Doc: "d.md", Heading: "## H"}, "x := f(\n", 0); err == nil {
		t.Error("a block that does not parse gave a program")
	}
}

func TestProgramPointsErrorsAtTheDocument(t *testing.T) {
	block, line, err := Block(doc, "## Use it")
	if err != nil {
		t.Fatal(err)
	}
	src, err := Program(Snippet{Doc: "d.md", Heading: "## Use it"}, block, line)
	if err != nil {
		t.Fatal(err)
	}
	// The block's line 6 ("v, err := x.New()") is line 18 of the document.
	for _, want := range []string{"//line d.md:18\nv, err := x.New()\n", "//line d.md:19\nif err != nil { return err }\n"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("program lacks %q:\n%s", want, src)
		}
	}
}
