package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action      string
	Package     string
	ImportPath  string // build-output and build-fail
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

type testKey struct{ pkg, test string }

// skip is one skipped test and the reason it logged.
type skip struct {
	pkg, test, reason string
}

type counts struct {
	passed, failed, skipped int
	seconds                 float64
	failures                []string
	skips                   []skip
}

// Summary accumulates the events of one or more `go test -json` runs.
type Summary struct {
	modules []string // module paths, to attribute packages
	w       io.Writer

	output   map[testKey][]string // a running test's output so far
	build    map[string][]string  // build output by import path
	started  map[string]bool      // packages that started and have not ended
	byModule map[string]*counts
	order    []string // modules in order of first appearance
	failedIn map[string]bool
}

// NewSummary returns a Summary that attributes packages to the longest
// matching path of modules and echoes go test's usual lines to w.
func NewSummary(modules []string, w io.Writer) *Summary {
	return &Summary{
		modules:  modules,
		w:        w,
		output:   map[testKey][]string{},
		build:    map[string][]string{},
		started:  map[string]bool{},
		byModule: map[string]*counts{},
		failedIn: map[string]bool{},
	}
}

func (s *Summary) module(pkg string) *counts {
	mod := "(other)"
	best := -1
	for _, m := range s.modules {
		if (pkg == m || strings.HasPrefix(pkg, m+"/")) && len(m) > best {
			mod, best = m, len(m)
		}
	}
	c := s.byModule[mod]
	if c == nil {
		c = &counts{}
		s.byModule[mod] = c
		s.order = append(s.order, mod)
	}
	return c
}

// Read consumes a stream of go test -json lines. Lines that are not JSON
// (a go command error printed to the same stream) are echoed as they are.
func (s *Summary) Read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1024*1024), 64*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(s.w, "%s\n", line)
			continue
		}
		s.add(e)
	}
	return sc.Err()
}

func (s *Summary) add(e event) {
	switch e.Action {
	case "build-output":
		s.build[e.ImportPath] = append(s.build[e.ImportPath], e.Output)
		return
	case "build-fail":
		return
	}
	if e.Package == "" {
		return
	}
	c := s.module(e.Package)
	k := testKey{e.Package, e.Test}
	if e.Test == "" {
		switch e.Action {
		case "start":
			s.started[e.Package] = true
		case "output":
			if e.Output != "PASS\n" {
				fmt.Fprint(s.w, e.Output)
			}
		case "pass", "skip":
			delete(s.started, e.Package)
			c.seconds += e.Elapsed
		case "fail":
			delete(s.started, e.Package)
			c.seconds += e.Elapsed
			if e.FailedBuild != "" {
				for _, l := range s.build[e.FailedBuild] {
					fmt.Fprint(s.w, l)
				}
				fmt.Fprintf(s.w, "FAIL\t%s [build failed]\n", e.Package)
			}
			if !s.failedIn[e.Package] {
				// No test failed, yet the package did: a build failure, a
				// panic or os.Exit outside a test, a timeout.
				c.failed++
				why := "the package failed outside any test"
				if e.FailedBuild != "" {
					why = "build failed: " + e.FailedBuild
				}
				c.failures = append(c.failures, fmt.Sprintf("%s (%s)", e.Package, why))
			}
		}
		return
	}
	switch e.Action {
	case "output":
		s.output[k] = append(s.output[k], e.Output)
	case "pass":
		c.passed++
		delete(s.output, k)
	case "fail":
		c.failed++
		s.failedIn[e.Package] = true
		c.failures = append(c.failures, e.Package+" "+e.Test)
		for _, l := range s.output[k] {
			if !framing(l) {
				fmt.Fprint(s.w, l)
			}
		}
		delete(s.output, k)
	case "skip":
		c.skipped++
		c.skips = append(c.skips, skip{pkg: e.Package, test: e.Test, reason: reason(s.output[k])})
		delete(s.output, k)
	}
}

// framing reports whether l is a line go test -v adds around a test's own
// output.
func framing(l string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

var logPrefix = regexp.MustCompile(`^[\w./-]+\.go:\d+: `)

// reason is what a skipped test logged, without go test's framing lines.
func reason(lines []string) string {
	var parts []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || framing(l) || strings.HasPrefix(t, "--- SKIP:") {
			continue
		}
		// Drop the file:line prefix t.Log adds, so that one helper's skip
		// reads the same wherever it was called from.
		if m := logPrefix.FindStringIndex(t); m != nil {
			t = t[m[1]:]
		}
		parts = append(parts, t)
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " | ")
}

// finish counts each package that started and never ended (the run was
// killed, or go test's output was cut short) as a failure.
func (s *Summary) finish() {
	var pending []string
	for p := range s.started {
		pending = append(pending, p)
	}
	sort.Strings(pending)
	for _, p := range pending {
		c := s.module(p)
		c.failed++
		c.failures = append(c.failures, p+" (its output ended before the package finished: killed or cut short)")
		delete(s.started, p)
	}
}

// Totals returns the counts over every module.
func (s *Summary) Totals() (passed, failed, skipped int) {
	s.finish()
	for _, c := range s.byModule {
		passed += c.passed
		failed += c.failed
		skipped += c.skipped
	}
	return passed, failed, skipped
}

// Report prints the per-module table, the skips grouped by reason, the
// failures, and the closing count line. It reports whether the run passed:
// no failure, no package left unfinished, at least one test run.
func (s *Summary) Report() bool {
	s.finish()
	w := s.w
	fmt.Fprintf(w, "\n== test summary (tests and subtests, per module)\n")
	width := len("module")
	for _, m := range s.order {
		width = max(width, len(m))
	}
	fmt.Fprintf(w, "%-*s %7s %7s %7s %8s\n", width, "module", "passed", "failed", "skipped", "seconds")
	for _, m := range s.order {
		c := s.byModule[m]
		fmt.Fprintf(w, "%-*s %7d %7d %7d %8.1f\n", width, m, c.passed, c.failed, c.skipped, c.seconds)
	}
	for _, m := range s.order {
		c := s.byModule[m]
		if len(c.skips) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nskipped in %s (%d), by reason:\n", m, len(c.skips))
		groups := map[string][]skip{}
		var reasons []string
		for _, sk := range c.skips {
			if groups[sk.reason] == nil {
				reasons = append(reasons, sk.reason)
			}
			groups[sk.reason] = append(groups[sk.reason], sk)
		}
		sort.SliceStable(reasons, func(i, j int) bool { return len(groups[reasons[i]]) > len(groups[reasons[j]]) })
		for _, r := range reasons {
			g := groups[r]
			var names []string
			for i, sk := range g {
				if i == 5 {
					names = append(names, fmt.Sprintf("and %d more", len(g)-5))
					break
				}
				names = append(names, path.Base(sk.pkg)+"."+sk.test)
			}
			fmt.Fprintf(w, "  %d× %s\n      %s\n", len(g), r, strings.Join(names, ", "))
		}
	}
	for _, m := range s.order {
		c := s.byModule[m]
		if len(c.failures) > 0 {
			fmt.Fprintf(w, "\nfailed in %s:\n", m)
			for _, f := range c.failures {
				fmt.Fprintf(w, "  %s\n", f)
			}
		}
	}
	passed, failed, skipped := s.Totals()
	if passed+failed == 0 {
		fmt.Fprintf(w, "\nno test ran\n")
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	return failed == 0 && passed > 0
}
