package main

import (
	"strings"
	"testing"
)

// run feeds lines of go test -json through a Summary over two modules.
func run(t *testing.T, lines ...string) (out string, ok bool, passed, failed, skipped int) {
	t.Helper()
	var b strings.Builder
	s := NewSummary([]string{"example.com/m", "example.com/m/sub"}, &b)
	if err := s.Read(strings.NewReader(strings.Join(lines, "\n") + "\n")); err != nil {
		t.Fatal(err)
	}
	ok = s.Report()
	passed, failed, skipped = s.Totals()
	return b.String(), ok, passed, failed, skipped
}

func TestCountsPerModuleAndSkipReasons(t *testing.T) {
	out, ok, p, f, s := run(t,
		`{"Action":"start","Package":"example.com/m/a"}`,
		`{"Action":"run","Package":"example.com/m/a","Test":"TestOne"}`,
		`{"Action":"output","Package":"example.com/m/a","Test":"TestOne","Output":"=== RUN   TestOne\n"}`,
		`{"Action":"pass","Package":"example.com/m/a","Test":"TestOne","Elapsed":0}`,
		`{"Action":"run","Package":"example.com/m/a","Test":"TestDB"}`,
		`{"Action":"output","Package":"example.com/m/a","Test":"TestDB","Output":"=== RUN   TestDB\n"}`,
		`{"Action":"output","Package":"example.com/m/a","Test":"TestDB","Output":"    db_test.go:9: LOBBYHOST_POSTGRES_DSN is not set\n"}`,
		`{"Action":"output","Package":"example.com/m/a","Test":"TestDB","Output":"--- SKIP: TestDB (0.00s)\n"}`,
		`{"Action":"skip","Package":"example.com/m/a","Test":"TestDB","Elapsed":0}`,
		`{"Action":"output","Package":"example.com/m/a","Output":"ok  \texample.com/m/a\t0.01s\n"}`,
		`{"Action":"pass","Package":"example.com/m/a","Elapsed":0.5}`,
		`{"Action":"start","Package":"example.com/m/sub/b"}`,
		`{"Action":"run","Package":"example.com/m/sub/b","Test":"TestDB2"}`,
		`{"Action":"output","Package":"example.com/m/sub/b","Test":"TestDB2","Output":"    db_test.go:9: LOBBYHOST_POSTGRES_DSN is not set\n"}`,
		`{"Action":"skip","Package":"example.com/m/sub/b","Test":"TestDB2","Elapsed":0}`,
		`{"Action":"run","Package":"example.com/m/sub/b","Test":"TestTwo"}`,
		`{"Action":"pass","Package":"example.com/m/sub/b","Test":"TestTwo","Elapsed":0}`,
		`{"Action":"pass","Package":"example.com/m/sub/b","Elapsed":0.5}`,
	)
	if !ok || p != 2 || f != 0 || s != 2 {
		t.Fatalf("ok=%v passed=%d failed=%d skipped=%d, want true 2 0 2\n%s", ok, p, f, s, out)
	}
	for _, want := range []string{
		"ok  \texample.com/m/a\t0.01s\n",
		"skipped in example.com/m (1), by reason:\n  1× LOBBYHOST_POSTGRES_DSN is not set\n      a.TestDB\n",
		"skipped in example.com/m/sub (1)",
		"\n2 passed, 0 failed, 2 skipped\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "2 passed, 0 failed, 2 skipped\n") {
		t.Errorf("the count line is not the last line:\n%s", out)
	}
}

func TestFailedTestPrintsItsOutput(t *testing.T) {
	out, ok, p, f, _ := run(t,
		`{"Action":"start","Package":"example.com/m"}`,
		`{"Action":"run","Package":"example.com/m","Test":"TestBad"}`,
		`{"Action":"output","Package":"example.com/m","Test":"TestBad","Output":"=== RUN   TestBad\n"}`,
		`{"Action":"output","Package":"example.com/m","Test":"TestBad","Output":"    x_test.go:3: got 1, want 2\n"}`,
		`{"Action":"output","Package":"example.com/m","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}`,
		`{"Action":"fail","Package":"example.com/m","Test":"TestBad","Elapsed":0}`,
		`{"Action":"output","Package":"example.com/m","Output":"FAIL\texample.com/m\t0.01s\n"}`,
		`{"Action":"fail","Package":"example.com/m","Elapsed":0.01}`,
	)
	if ok || p != 0 || f != 1 {
		t.Fatalf("ok=%v passed=%d failed=%d, want false 0 1\n%s", ok, p, f, out)
	}
	if !strings.Contains(out, "    x_test.go:3: got 1, want 2\n--- FAIL: TestBad (0.00s)\n") || strings.Contains(out, "=== RUN") {
		t.Errorf("failing test's output not echoed as go test prints it:\n%s", out)
	}
}

func TestBuildFailureAndCutShortOutputAreFailures(t *testing.T) {
	out, ok, _, f, _ := run(t,
		`{"ImportPath":"example.com/m/a [example.com/m/a.test]","Action":"build-output","Output":"a_test.go:1:1: undefined: x\n"}`,
		`{"ImportPath":"example.com/m/a [example.com/m/a.test]","Action":"build-fail"}`,
		`{"Action":"start","Package":"example.com/m/a"}`,
		`{"Action":"fail","Package":"example.com/m/a","Elapsed":0,"FailedBuild":"example.com/m/a [example.com/m/a.test]"}`,
		`{"Action":"start","Package":"example.com/m/b"}`,
		`{"Action":"run","Package":"example.com/m/b","Test":"TestOK"}`,
		`{"Action":"pass","Package":"example.com/m/b","Test":"TestOK","Elapsed":0}`,
		`{"Action":"pass","Package":"example.com/m/b","Elapsed":0}`,
		`{"Action":"start","Package":"example.com/m/c"}`,
	)
	if ok || f != 2 {
		t.Fatalf("ok=%v failed=%d, want false 2 (a build failure, c cut short)\n%s", ok, f, out)
	}
	for _, want := range []string{"a_test.go:1:1: undefined: x\n", "FAIL\texample.com/m/a [build failed]", "example.com/m/c (its output ended"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestNoTestIsAFailure(t *testing.T) {
	out, ok, _, _, _ := run(t,
		`{"Action":"start","Package":"example.com/m"}`,
		`{"Action":"output","Package":"example.com/m","Output":"ok  \texample.com/m\t0.01s [no tests to run]\n"}`,
		`{"Action":"pass","Package":"example.com/m","Elapsed":0.01}`,
	)
	if ok || !strings.Contains(out, "no test ran") {
		t.Fatalf("a run of no test passed:\n%s", out)
	}
}
