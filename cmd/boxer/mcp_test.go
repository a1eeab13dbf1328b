package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// boxer mcp reads at most a /v1/run-python body and its envelope a line
// (--max-run-body + 64 KiB): a longer line ends the session with an error
// instead of growing a buffer without bound, while the same line under a
// larger limit is read and answered. --server makes it run nothing itself,
// so no sandbox is needed; nothing listens on port 9, so the answer is a
// tool error.
func TestMCPStdioLineLimit(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"exec","arguments":{"code":"` +
		strings.Repeat("x", 100<<10) + `"}}}` + "\n"
	session := func(maxBody string) (int, string, string) {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		var errb bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- cmdMCP(context.Background(), []string{"--server", "http://127.0.0.1:9", "--max-run-body", maxBody}, inR, outW, &errb)
			outW.Close()
		}()
		go func() {
			io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
			io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
			io.WriteString(inW, call)
		}()
		var answer string
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"id":2`) {
				answer = sc.Text()
				break
			}
		}
		inW.Close()
		go io.Copy(io.Discard, outR)
		return <-done, answer, errb.String()
	}
	if code, answer, errs := session("1024"); code != 1 || answer != "" || !strings.Contains(errs, `"msg":"boxer mcp"`) {
		t.Fatalf("a line over the limit: exit %d, answer %.200q, stderr %.300q", code, answer, errs)
	}
	if code, answer, errs := session("1MiB"); code != 0 || !strings.Contains(answer, `"isError":true`) {
		t.Fatalf("a line under the limit: exit %d, answer %.300q, stderr %.300q", code, answer, errs)
	}
}

// With --key, each call forwarded to the service carries the key, and
// nothing else in its place: a keyed service knows the caller.
func TestMCPRemoteSendsKey(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"success":true,"result":{"stdout":"4\n","stderr":"","exitCode":0}}`)
	}))
	defer srv.Close()
	for _, key := range []string{"bxk_secret", ""} {
		h, err := remoteAPI(srv.URL, key, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("POST", "/v1/exec", strings.NewReader(`{"code":"print(2+2)","language":"python"}`))
		if key == "" {
			r.Header.Set("Authorization", "Bearer from-the-agent")
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		want := "Bearer " + key
		if key == "" {
			want = "Bearer from-the-agent"
		}
		if a := <-got; a != want {
			t.Errorf("key %q: the service saw Authorization %q, want %q", key, a, want)
		}
	}
}
