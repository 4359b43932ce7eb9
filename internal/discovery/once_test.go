package discovery

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/discovery/http"

	"github.com/kvwatch/kvwatch/internal/config"
	"github.com/kvwatch/kvwatch/internal/pipeline"
)

// TestOnceReturnsAtItsTimeout: Once over an entry that never answers
// returns the config's own targets when its timeout ends, every time, over
// many short timeouts (the runner's Run returns at the same moment; the
// order of the two is TestWaitOnceTakesTheResultOnce's).
func TestOnceReturnsAtItsTimeout(t *testing.T) {
	sd := http.DefaultSDConfig
	sd.URL = "http://127.0.0.1:1/sd" // refused: the entry never answers
	c := config.Default()
	c.Targets = []config.Target{{Name: "static", URL: "http://127.0.0.1:2"}}
	c.HTTPSD = []config.HTTPSD{{Config: sd}}
	p, err := pipeline.Load(config.Sources{Config: c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := range 200 {
			out, err := Once(context.Background(), p, nil, nil, time.Duration(1+i%5)*time.Millisecond)
			if err == nil && (len(out.Targets) != 1 || out.Targets[0].Name != "static") {
				t.Errorf("run %d: targets %v, want the static one", i, out.Targets)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Once did not return within 2 minutes")
	}
}

// TestWaitOnceTakesTheResultOnce: at the timeout the runner's result is
// often already on ran; whichever of the two the wait takes, it says
// whether it took the result, so that Once's receive afterwards finds it
// exactly when it was not taken (the other way round, Once waited
// forever). 100 rounds with both ready see both orders.
func TestWaitOnceTakesTheResultOnce(t *testing.T) {
	var taken, left int
	for range 100 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ran := make(chan error, 1)
		ran <- nil
		w := waitOnce(ctx, ran, nil, func() bool { return false })
		if !w.timedOut {
			t.Fatalf("wait %+v at the timeout, want timedOut", w)
		}
		select {
		case <-ran:
			if w.returned {
				t.Fatal("the result was taken twice")
			}
			left++
		default:
			if !w.returned {
				t.Fatal("the wait took the result and says it did not: Once would wait for it forever")
			}
			taken++
		}
	}
	if taken == 0 || left == 0 {
		t.Logf("only one order seen in 100 rounds (taken %d, left %d)", taken, left)
	}
}
