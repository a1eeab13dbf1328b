package api

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"boxer"
)

// holdBack is a layer that keeps the answer until the handler is done, as
// the x402 layer does until the payment settles: it cannot flush.
type holdBack struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (h *holdBack) Header() http.Header         { return h.header }
func (h *holdBack) WriteHeader(status int)      { h.status = status }
func (h *holdBack) Write(b []byte) (int, error) { return h.body.Write(b) }

// Events carry whole characters, the output as the runner gave it, and
// the answer last; behind a layer that holds the answer back they come
// all at once, and an error before any output is the plain error.
func TestStreamEvents(t *testing.T) {
	var held *holdBack
	ts := newTestServer(t, Config{}, func(d *Deps) {
		d.Payment = func(route string, next http.Handler, _ ErrorWriter) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				held = &holdBack{header: http.Header{}}
				next.ServeHTTP(held, r)
				for k, v := range held.header {
					w.Header()[k] = v
				}
				w.WriteHeader(held.status)
				w.Write(held.body.Bytes())
			})
		}
	})
	ts.runner.set(func(ctx context.Context, job *boxer.Job) (*boxer.Result, error) {
		euro := []byte("€\n") // three bytes, then a newline
		job.Output(boxer.Stdout, euro[:1])
		job.Output(boxer.Stderr, []byte("warn\n"))
		job.Output(boxer.Stdout, euro[1:])
		res := fourResult()
		res.Stdout = boxer.Output{Data: euro, Bytes: int64(len(euro))}
		return res, nil
	})
	req := httptest.NewRequest(http.MethodPost, "/v1/exec", strings.NewReader(`{"code":"print('€')"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	rec := httptest.NewRecorder()
	ts.ServeHTTP(rec, req)
	want := "event: stderr\ndata: {\"data\":\"warn\\n\"}\n\n" +
		"event: stdout\ndata: {\"data\":\"€\\n\"}\n\n" +
		"event: result\ndata: {\"success\":true,\"result\":{\"stdout\":\"€\\n\""
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream" || !strings.HasPrefix(rec.Body.String(), want) {
		t.Fatalf("%d %s\n%s\nwant it to start\n%s", rec.Code, rec.Header().Get("Content-Type"), rec.Body, want)
	}

	req = httptest.NewRequest(http.MethodPost, "/v1/exec", strings.NewReader(`{"code":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	rec = httptest.NewRecorder()
	ts.ServeHTTP(rec, req)
	if rec.Code != 400 || rec.Header().Get("Content-Type") != "application/json" || !strings.Contains(rec.Body.String(), `"invalid_request"`) {
		t.Fatalf("an error before output: %d %s %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}

func TestCompleteUTF8(t *testing.T) {
	for in, want := range map[string]int{"": 0, "ab": 2, "a\xe2\x82": 1, "a\xe2\x82\xac": 4, "\xf0\x9f": 0, "\xff": 1, "a\x82": 2} {
		if got := completeUTF8([]byte(in)); got != want {
			t.Errorf("completeUTF8(%q) = %d, want %d", in, got, want)
		}
	}
}
