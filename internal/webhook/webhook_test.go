package webhook

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// A delivery is retried until the receiver takes it; the body and headers
// arrive as sent, signed.
func TestDeliverRetries(t *testing.T) {
	var calls atomic.Int32
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		b, _ := io.ReadAll(r.Body)
		got.Store(r.Header.Get("X-Boxer-Signature") + " " + r.Header.Get("X-Boxer-Job-Id") + " " + string(b))
	}))
	defer srv.Close()
	s, err := New(Config{Secret: []byte("0123456789abcdef"), AllowPrivate: true, Backoff: time.Millisecond}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0)
	s.now = func() time.Time { return at }
	if !s.Deliver(context.Background(), srv.URL, "job_1", []byte(`{"ok":true}`)) || calls.Load() != 3 {
		t.Fatalf("delivered after %d calls", calls.Load())
	}
	want := Sign([]byte("0123456789abcdef"), []byte(`{"ok":true}`), at) + ` job_1 {"ok":true}`
	if got.Load() != want || !strings.HasPrefix(want, "t=1700000000,v1=") {
		t.Fatalf("received %q, want %q", got.Load(), want)
	}
	s.cfg.Attempts = 2
	calls.Store(-10)
	if s.Deliver(context.Background(), srv.URL, "job_2", nil) {
		t.Fatal("a receiver that keeps failing took the delivery")
	}
}

// Without AllowPrivate, no connection reaches loopback or a private
// address, however the URL names it: checked on the address dialled.
func TestPrivateRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a webhook reached loopback")
	}))
	defer srv.Close()
	s, err := New(Config{Secret: []byte("0123456789abcdef"), Attempts: 1}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if s.Deliver(context.Background(), srv.URL, "job_1", nil) {
		t.Fatal("delivered to loopback")
	}
	for _, addr := range []string{"127.0.0.1:80", "[::1]:80", "10.1.2.3:80", "192.168.1.1:443", "169.254.169.254:80", "[fe80::1]:80", "0.0.0.0:80", "[::ffff:127.0.0.1]:80"} {
		if s.control("tcp", addr, nil) == nil {
			t.Errorf("%s allowed", addr)
		}
	}
	if err := s.control("tcp", "192.0.2.10:443", nil); err != nil {
		t.Errorf("a public address refused: %v", err)
	}
	for u, ok := range map[string]bool{"https://example.com/h": true, "http://127.0.0.1/h": false, "http://api.localhost/h": false,
		"http://[::1]/": false, "file:///etc/passwd": false, "https://u:p@example.com/": false, "/relative": false} {
		if err := s.Check(u); (err == nil) != ok {
			t.Errorf("Check(%q) = %v", u, err)
		}
	}
}
