package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"boxer"
)

// These tests go through a real HTTP server and client, for what a
// ResponseRecorder cannot show: a disconnect seen by the server, a chunked
// body cut while it streams in.

func TestHTTPClientDisconnectCancelsRun(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	br := newBlockingRunner()
	ts.runner.set(br.run)
	srv := httptest.NewServer(ts)
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/exec", strings.NewReader(`{"code":"while True: pass"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-br.started
	cancel() // the client hangs up mid-run
	if err := <-br.ended; err != context.Canceled {
		t.Fatalf("runner saw %v, want its context cancelled by the disconnect", err)
	}
	if err := <-errc; err == nil {
		t.Fatal("the cancelled client got a response")
	}
}

func TestHTTPChunkedBodyOverCap(t *testing.T) {
	ts := newTestServer(t, Config{MaxRunBodyBytes: 64 << 10}, nil)
	srv := httptest.NewServer(ts)
	defer srv.Close()

	// An endless body: the server must answer 413 after the cap instead of
	// reading forever.
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"files":{"main.py":"`))
		chunk := []byte(strings.Repeat("a", 4096))
		for {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
	}()
	defer pr.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/run-python", pr)
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("status = %d, want 413", resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), boxer.ECodePayloadTooLarge) || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("response %s, headers %v", body, resp.Header)
	}
}
