package testenv

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"time"
)

// Handlers of hostile targets, shared by the fault, security and soak
// tests: each misbehaves as a broken engine or proxy does.

// SlowLoris writes a valid page one line every 200ms, for ever (until the
// client leaves).
func SlowLoris(w http.ResponseWriter, r *http.Request) {
	fmt.Fprint(w, "# TYPE sglang:max_total_num_tokens gauge\n")
	for i := 0; ; i++ {
		if _, err := fmt.Fprintf(w, "sglang:max_total_num_tokens{tp_rank=\"%d\"} 1000\n", i); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// EndlessBody writes one valid line after another until the client leaves.
func EndlessBody(w http.ResponseWriter, _ *http.Request) {
	line := []byte("sglang:num_running_reqs{tp_rank=\"0\"} 1\n")
	for {
		if _, err := w.Write(line); err != nil {
			return
		}
	}
}

// HangUp closes the connection without an answer.
func HangUp(w http.ResponseWriter, _ *http.Request) {
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		c.Close()
	}
}

// GzipBomb returns a handler answering 64 MiB of zeros gzipped (about
// 64 KiB on the wire) as the page's body.
func GzipBomb() http.HandlerFunc {
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zeros := make([]byte, 1<<20)
	for range 64 {
		zw.Write(zeros)
	}
	zw.Close()
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(bomb.Bytes())
	}
}
