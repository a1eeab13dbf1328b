package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"boxer"
)

const execBody = `{"code":"print(2+2)","language":"python"}`

func TestKeysRequired(t *testing.T) {
	ts := newTestServer(t, Config{KeysRequired: true}, nil)
	ctx := context.Background()
	_, token, err := ts.store.AddKey(ctx, "ci", 0)
	if err != nil {
		t.Fatal(err)
	}
	revoked, revokedToken, err := ts.store.AddKey(ctx, "old", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.store.RevokeKey(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, auth string
		status     int
		code, msg  string
	}{
		{"no key", "", 401, boxer.ECodeUnauthorized, "this boxer needs an API key: send Authorization: Bearer <key> (its operator makes one with boxer keys add)"},
		{"unknown key", "Bearer bxk_aaaaaaaaaa_bbbb", 401, boxer.ECodeUnauthorized, "this API key is not valid"},
		{"revoked key", "Bearer " + revokedToken, 401, boxer.ECodeUnauthorized, "this API key was revoked"},
		{"not bearer", "Basic " + token, 401, boxer.ECodeUnauthorized, "send the API key as Authorization: Bearer <key>"},
		{"valid key", "Bearer " + token, 200, "", ""},
		{"valid key, scheme in lower case", "bearer " + token, 200, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := ts.runner.count()
			rec := ts.do("POST", "/v1/exec", execBody, "Authorization", tc.auth)
			if tc.status == 200 {
				if rec.Code != 200 || ts.runner.count() != n+1 {
					t.Fatalf("status %d, %s", rec.Code, rec.Body)
				}
				return
			}
			if e := wantError(t, rec, tc.status, tc.code); e.Message != tc.msg {
				t.Fatalf("message %q, want %q", e.Message, tc.msg)
			}
			if rec.Header().Get("WWW-Authenticate") == "" || ts.runner.count() != n {
				t.Fatalf("no WWW-Authenticate, or the job ran: %v", rec.Header())
			}
		})
	}
	// The job record route needs a key too: job ids are the callers' own
	// and may be guessed.
	wantError(t, ts.do("GET", "/v1/jobs/j1", ""), 401, boxer.ECodeUnauthorized)
	if rec := ts.do("GET", "/v1/jobs/j1", "", "Authorization", "Bearer "+token); rec.Code != 404 {
		t.Fatalf("GET a job with a key: %d", rec.Code)
	}
	// Health stays public.
	if rec := ts.do("GET", "/v1/health", ""); rec.Code != 200 {
		t.Fatalf("health: %d", rec.Code)
	}
	// Usage counts the key's calls, not refusals.
	if err := ts.store.FlushCalls(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := ts.store.Keys(ctx)
	calls := map[string]int64{}
	for _, k := range keys {
		calls[k.Name] = k.Calls
	}
	if err != nil || len(keys) != 2 || calls["ci"] != 2 || calls["old"] != 0 {
		t.Fatalf("keys %+v, %v: want 2 calls for ci, none for old", keys, err)
	}
}

// Without KeysRequired, anonymous callers are served, and a key is still
// checked when one is sent.
func TestKeysOptional(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	if rec := ts.do("POST", "/v1/exec", execBody); rec.Code != 200 {
		t.Fatalf("anonymous: %d %s", rec.Code, rec.Body)
	}
	wantError(t, ts.do("POST", "/v1/exec", execBody, "Authorization", "Bearer bxk_nope"), 401, boxer.ECodeUnauthorized)
}

// A key holder is not charged: the payment layer never sees its calls,
// while a caller without a key meets it.
func TestKeyHolderIsNotCharged(t *testing.T) {
	var charged int
	ts := newTestServer(t, Config{KeysRequired: true}, func(d *Deps) {
		d.Payment = func(route string, next http.Handler, fail ErrorWriter) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				charged++
				fail(w, r, boxer.Errorf(boxer.ECodePaymentRequired, "pay"))
			})
		}
	})
	_, token, err := ts.store.AddKey(context.Background(), "friend", 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec := ts.do("POST", "/v1/exec", execBody, "Authorization", "Bearer "+token); rec.Code != 200 || charged != 0 {
		t.Fatalf("key holder: %d, charged %d times", rec.Code, charged)
	}
	// Without a key, payments on: pay, not 401.
	wantError(t, ts.do("POST", "/v1/run-python", `{"files":{"main.py":"1"}}`), 402, boxer.ECodePaymentRequired)
	if charged != 1 {
		t.Fatalf("charged %d times, want 1", charged)
	}
}

func TestKeyRateLimit(t *testing.T) {
	ts := newTestServer(t, Config{}, nil)
	_, token, err := ts.store.AddKey(context.Background(), "slow", 2)
	if err != nil {
		t.Fatal(err)
	}
	auth := []string{"Authorization", "Bearer " + token}
	for i := 0; i < 2; i++ {
		if rec := ts.do("POST", "/v1/exec", execBody, auth...); rec.Code != 200 {
			t.Fatalf("call %d: %d", i, rec.Code)
		}
	}
	rec := ts.do("POST", "/v1/exec", execBody, auth...)
	wantError(t, rec, 429, boxer.ECodeRateLimited)
	if ra := rec.Header().Get("Retry-After"); ra != "30" {
		t.Fatalf("Retry-After %q, want 30 (2 a minute)", ra)
	}
	ts.clock.Advance(30 * time.Second)
	if rec := ts.do("POST", "/v1/exec", execBody, auth...); rec.Code != 200 {
		t.Fatalf("after 30 s: %d", rec.Code)
	}
	wantError(t, ts.do("POST", "/v1/exec", execBody, auth...), 429, boxer.ECodeRateLimited)
}

// A key added while boxer serves takes effect within keyCountTTL: from
// then on a caller without one is refused; revoking the last lets it in
// again.
func TestKeysAddedWhileServing(t *testing.T) {
	ts := newTestServer(t, Config{KeysRequired: true}, nil)
	ctx := context.Background()
	if rec := ts.do("POST", "/v1/exec", execBody); rec.Code != 200 {
		t.Fatalf("no key yet: %d", rec.Code)
	}
	k, _, err := ts.store.AddKey(ctx, "new", 0)
	if err != nil {
		t.Fatal(err)
	}
	ts.clock.Advance(keyCountTTL)
	wantError(t, ts.do("POST", "/v1/exec", execBody), 401, boxer.ECodeUnauthorized)
	if err := ts.store.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	ts.clock.Advance(keyCountTTL)
	if rec := ts.do("POST", "/v1/exec", execBody); rec.Code != 200 {
		t.Fatalf("last key revoked: %d", rec.Code)
	}
}

// A job_id is each key's own: another key can neither read the result
// nor take the id.
func TestJobIDsArePerKey(t *testing.T) {
	ts := newTestServer(t, Config{KeysRequired: true}, nil)
	ctx := context.Background()
	_, a, _ := ts.store.AddKey(ctx, "a", 0)
	_, b, _ := ts.store.AddKey(ctx, "b", 0)
	const job = `{"job_id":"build-1","files":{"main.py":"print(1)"}}`
	if rec := ts.do("POST", "/v1/run-python", job, "Authorization", "Bearer "+a); rec.Code != 200 {
		t.Fatalf("a runs: %d %s", rec.Code, rec.Body)
	}
	if rec := ts.do("GET", "/v1/jobs/build-1", "", "Authorization", "Bearer "+a); rec.Code != 200 {
		t.Fatalf("a reads its job: %d", rec.Code)
	}
	wantError(t, ts.do("GET", "/v1/jobs/build-1", "", "Authorization", "Bearer "+b), 404, boxer.ECodeNotFound)
	n := ts.runner.count()
	other := `{"job_id":"build-1","files":{"main.py":"print(2)"}}`
	if rec := ts.do("POST", "/v1/run-python", other, "Authorization", "Bearer "+b); rec.Code != 200 || ts.runner.count() != n+1 {
		t.Fatalf("b's own build-1: %d %s", rec.Code, rec.Body)
	}
}

// BodyFirst does for a front end what the routes do before a handler: a
// caller refused anyway is refused before its body is read, a body over
// the limit is refused, and otherwise the front end gets the body whole.
func TestBodyFirst(t *testing.T) {
	ts := newTestServer(t, Config{KeysRequired: true}, nil)
	var got []byte
	h := ts.BodyFirst(64, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.WriteHeader(204)
	}))
	send := func(body io.Reader, headers ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/mcp", body)
		r.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			r.Header.Set(headers[i], headers[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := send(strings.NewReader(`{"a":1}`)); w.Code != 204 || string(got) != `{"a":1}` {
		t.Fatalf("no key exists yet: %d %q", w.Code, got)
	}
	if _, _, err := ts.store.AddKey(context.Background(), "k", 0); err != nil {
		t.Fatal(err)
	}
	ts.clock.Advance(keyCountTTL)
	read := &countingReader{r: strings.NewReader(`{"a":1}`)}
	w := send(read)
	wantError(t, w, 401, boxer.ECodeUnauthorized)
	if read.n != 0 || w.Header().Get("WWW-Authenticate") == "" {
		t.Fatalf("%d bytes of an anonymous body read before the refusal", read.n)
	}
	wantError(t, send(strings.NewReader(strings.Repeat(" ", 65)+"{}"), "Authorization", "Bearer x"), 413, boxer.ECodePayloadTooLarge)
	got = nil
	if w := send(strings.NewReader(`{"b":2}`), "Authorization", "Bearer x"); w.Code != 204 || string(got) != `{"b":2}` {
		t.Fatalf("with a key (the API judges it): %d %q", w.Code, got)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
