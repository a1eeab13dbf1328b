package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"boxer"
)

// Streaming. A call to a run route or to a session's exec whose Accept
// names text/event-stream gets server-sent events: the program's stdout
// and stderr as it writes them,
//
//	event: stdout
//	data: {"data":"first line\n"}
//
// and the route's own answer last, as event "result" (the body the call
// would have had) or, should the call fail once output has gone out,
// "error" (the error envelope). A call that fails before any output gets
// its error as a plain JSON answer with its status, as without streaming.
//
// The program never waits for the client: output is queued in memory,
// within the run's output cap (each stream keeps at most OutputBytes),
// and a client that goes away cancels the run, as any client does. A
// priced call's output is held until its payment settles (the x402
// layer's rule: no output without settlement), so it comes all at once,
// in the same events.

// streamer is the ResponseWriter a streamed call's handler writes its
// answer to; the run's output reaches it through output.
type streamer struct {
	w      http.ResponseWriter // the client's
	header http.Header         // the handler's, for its answer
	live   bool                // w flushes: events go out as they come

	mu      sync.Mutex
	pending bytes.Buffer // events not yet written
	tails   [3][]byte    // by stream: an incomplete UTF-8 sequence held back
	started bool         // the event stream's header is out
	gone    bool         // a write to the client failed
	status  int          // the answer's, once the handler wrote it
	body    bytes.Buffer // the answer
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

type streamKey struct{}

// streamable lets h's caller ask for events (see above).
func (s *Server) streamable(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			h(w, r)
			return
		}
		st := &streamer{w: w, header: http.Header{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
		st.live = flushes(w)
		if st.live {
			go st.send()
		} else {
			close(st.done)
		}
		h(st, r.WithContext(context.WithValue(r.Context(), streamKey{}, st)))
		st.finish()
	}
}

// flushes reports whether w, or a writer it wraps, can flush: a live
// connection, not a layer that holds the answer back (x402's, until the
// payment settles). Asking Flush itself would send the header.
func flushes(w http.ResponseWriter) bool {
	for {
		if _, ok := w.(http.Flusher); ok {
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
}

// streamOf is the call's run output callback when it asked for events,
// nil otherwise.
func streamOf(r *http.Request) func(boxer.Stream, []byte) {
	if st, ok := r.Context().Value(streamKey{}).(*streamer); ok && st != nil {
		return st.output
	}
	return nil
}

// output queues a piece of a stream as an event. It never blocks on the
// client. A UTF-8 sequence cut at the piece's end waits for the rest, so
// that no event carries half a character.
func (st *streamer) output(s boxer.Stream, b []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	data := append(st.tails[s], b...)
	cut := completeUTF8(data)
	st.tails[s] = append([]byte(nil), data[cut:]...)
	st.event(s, data[:cut])
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

func (st *streamer) event(s boxer.Stream, data []byte) {
	if len(data) == 0 {
		return
	}
	name := map[boxer.Stream]string{boxer.Stdout: "stdout", boxer.Stderr: "stderr"}[s]
	b, _ := json.Marshal(struct {
		Data string `json:"data"`
	}{string(data)})
	writeEvent(&st.pending, name, b)
}

func writeEvent(buf *bytes.Buffer, name string, data []byte) {
	buf.WriteString("event: ")
	buf.WriteString(name)
	buf.WriteString("\ndata: ")
	buf.Write(bytes.TrimRight(data, "\n"))
	buf.WriteString("\n\n")
}

// completeUTF8 is the length of b's prefix that ends on a whole UTF-8
// sequence: b less a trailing sequence that its next bytes would finish.
func completeUTF8(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}

// send writes queued events to the client as they come, until finish.
func (st *streamer) send() {
	defer close(st.done)
	for {
		select {
		case <-st.wake:
			st.flush()
		case <-st.stop:
			return
		}
	}
}

// flush writes the queued events, starting the event stream if need be.
// The events are taken from the queue under the lock and written without
// it: output must never wait for the client.
func (st *streamer) flush() {
	st.mu.Lock()
	if st.pending.Len() == 0 || st.gone {
		st.pending.Reset()
		st.mu.Unlock()
		return
	}
	st.start()
	b := bytes.Clone(st.pending.Bytes())
	st.pending.Reset()
	st.mu.Unlock()
	if !st.write(b) {
		st.mu.Lock()
		st.gone = true
		st.mu.Unlock()
	}
}

// streamWriteTimeout bounds each write of events to the client: one that
// reads nothing for this long is dropped (its run goes on and ends, as for
// a client that left, and its answer is not sent).
const streamWriteTimeout = 30 * time.Second

// write sends b to the client and flushes it, within streamWriteTimeout.
// Only one goroutine writes at a time: send while the run goes on, finish
// after it.
func (st *streamer) write(b []byte) bool {
	rc := http.NewResponseController(st.w)
	_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, err := st.w.Write(b)
	if err == nil {
		err = rc.Flush()
	}
	return err == nil
}

// start sends the event stream's header, once. Caller holds mu.
func (st *streamer) start() {
	if st.started {
		return
	}
	st.started = true
	h := st.w.Header()
	for k, v := range st.header {
		if k != "Content-Type" && k != "Content-Length" {
			h[k] = v
		}
	}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: pass events on as they come
	st.w.WriteHeader(http.StatusOK)
}

// finish sends what is left once the handler has answered: the held back
// tails, the queued events and the answer as the last event; or, when
// nothing went out and the answer is an error, that error as it is.
func (st *streamer) finish() {
	close(st.stop)
	<-st.done
	st.mu.Lock()
	if st.status == 0 {
		st.status = http.StatusOK
	}
	ok := st.status/100 == 2
	if !st.started && !ok {
		h := st.w.Header()
		for k, v := range st.header {
			h[k] = v
		}
		st.w.WriteHeader(st.status)
		body := st.body.Bytes()
		st.mu.Unlock()
		_, _ = st.w.Write(body)
		return
	}
	for s := range st.tails {
		st.event(boxer.Stream(s), st.tails[s])
		st.tails[s] = nil
	}
	name := "result"
	if !ok {
		name = "error"
	}
	writeEvent(&st.pending, name, st.body.Bytes())
	st.start()
	rest, gone := bytes.Clone(st.pending.Bytes()), st.gone
	st.pending.Reset()
	st.mu.Unlock()
	switch {
	case gone:
	case !st.live: // a layer that holds the answer: no deadline to set
		_, _ = st.w.Write(rest)
	default:
		st.write(rest)
	}
}

// The handler's side: its answer is kept for finish.

func (st *streamer) Header() http.Header { return st.header }

func (st *streamer) WriteHeader(status int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.status == 0 {
		st.status = status
	}
}

func (st *streamer) Write(b []byte) (int, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.status == 0 {
		st.status = http.StatusOK
	}
	return st.body.Write(b)
}
