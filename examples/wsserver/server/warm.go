package server

import "time"

// warmPool runs calls into the lobby Service on goroutines kept between
// calls. A lobby command goes deep (the Service, the state machine, the
// store); on a fresh goroutine, such as the one net/http starts for each
// new connection, its stack grows by copying, several times per call. A
// warm goroutine grew once. The pool is elastic: a call takes an idle
// goroutine if there is one and starts another otherwise (so a slow store
// never makes calls wait for each other), and a goroutine idle for
// warmIdle ends.
type warmPool struct {
	work chan func()
}

// warmIdle is how long a pool goroutine waits for work before it ends.
const warmIdle = 10 * time.Second

func newWarmPool() *warmPool { return &warmPool{work: make(chan func())} }

// run calls f on a pool goroutine and returns when it has returned.
func (p *warmPool) run(f func()) {
	done := make(chan struct{})
	job := func() {
		defer close(done)
		f()
	}
	select {
	case p.work <- job:
	default:
		go p.worker(job)
	}
	<-done
}

func (p *warmPool) worker(job func()) {
	t := time.NewTimer(warmIdle)
	defer t.Stop()
	for {
		job()
		t.Reset(warmIdle)
		select {
		case job = <-p.work:
		case <-t.C:
			return
		}
	}
}
