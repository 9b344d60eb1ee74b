package server

import "testing"

// run returns once its function has returned, and a call never waits for
// another one in progress (a slow store must not serialise joins).
func TestWarmPoolRunsCallsConcurrently(t *testing.T) {
	p := newWarmPool()
	started, release, firstDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(firstDone)
		p.run(func() { close(started); <-release })
	}()
	<-started
	ran := false
	p.run(func() { ran = true }) // with the first call still blocked
	if !ran {
		t.Fatal("run returned before its function ran")
	}
	close(release)
	<-firstDone
	for i := range 3 { // and again, on whichever goroutines are idle
		n := 0
		p.run(func() { n = i + 1 })
		if n != i+1 {
			t.Fatalf("call %d: function did not run", i)
		}
	}
}
