package api

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

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

// A client that sends its headers and then stalls the body (slow loris)
// gets 408 request_timeout once BodyTimeout has passed, instead of holding
// the connection and a goroutine for as long as it likes.
func TestHTTPStalledBodyTimesOut(t *testing.T) {
	ts := newTestServer(t, Config{BodyTimeout: 200 * time.Millisecond}, nil)
	srv := httptest.NewServer(ts)
	defer srv.Close()

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "POST /v1/exec HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"code\":")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // the test's own bound, far beyond the server's
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || !strings.Contains(string(body), boxer.ECodeRequestTimeout) || !resp.Close {
		t.Fatalf("status %d, close %v, body %s", resp.StatusCode, resp.Close, body)
	}
	if ts.runner.count() != 0 {
		t.Fatal("a run started without its body")
	}
}

// The body's deadline is lifted once the body is in: a run that outlasts
// it is neither cut short nor taken for a client that went away.
func TestHTTPRunOutlastsBodyTimeout(t *testing.T) {
	const bodyTimeout = 100 * time.Millisecond
	ts := newTestServer(t, Config{BodyTimeout: bodyTimeout}, nil)
	ts.runner.set(func(ctx context.Context, _ *boxer.Job) (*boxer.Result, error) {
		select { // the run lasts five body timeouts
		case <-time.After(5 * bodyTimeout):
			return fourResult(), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	srv := httptest.NewServer(ts)
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/v1/exec", "application/json", strings.NewReader(`{"code":"print(2 + 2)"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"4\n"`) {
		t.Fatalf("status %d, body %s", resp.StatusCode, body)
	}
}

// A client that takes none of its answer is cut off once the answer's
// write deadline passes, instead of holding its connection, a goroutine
// and the answer's memory for as long as it likes.
func TestAnswerWriteDeadline(t *testing.T) {
	base, per := answerWriteBase, answerWritePer64K
	answerWriteBase, answerWritePer64K = 300*time.Millisecond, 0
	t.Cleanup(func() { answerWriteBase, answerWritePer64K = base, per })
	ts := newTestServer(t, Config{}, nil)
	ts.runner.set(func(ctx context.Context, job *boxer.Job) (*boxer.Result, error) {
		res := fourResult()
		big := bytes.Repeat([]byte("\x01"), 1<<20) // six bytes each in JSON
		res.Stdout = boxer.Output{Data: big, Bytes: int64(len(big))}
		return res, nil
	})
	srv := httptest.NewServer(ts)
	defer srv.Close()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"code":"print(1)"}`
	fmt.Fprintf(conn, "POST /v1/exec HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	time.Sleep(answerWriteBase + time.Second) // the client stalls past the deadline
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil || n >= resp.ContentLength {
		t.Fatalf("a stalled client got %d of %d bytes (%v): not cut off", n, resp.ContentLength, err)
	}
}
