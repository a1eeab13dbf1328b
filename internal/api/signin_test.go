package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"boxer"
)

// signInServer has stand-ins for the x402 layers: a payment names its
// payer in Test-Payer; a sign-in names its address in Test-Signed-In, is
// refused with Test-Bad-Sign-In, and without either is asked for (402).
func signInServer(t *testing.T) *testServer {
	return newTestServer(t, Config{}, func(d *Deps) {
		d.Payment = func(route string, next http.Handler, _ ErrorWriter) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				SetPayer(r, r.Header.Get("Test-Payer"))
				next.ServeHTTP(w, r)
			})
		}
		d.SignIn = func(route string, next http.Handler, fail ErrorWriter) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Header.Get("Test-Bad-Sign-In") != "":
					fail(w, r, boxer.Errorf(boxer.ECodeSignInRejected, "sign_in_nonce_used: replayed"))
				case r.Header.Get("Test-Signed-In") != "":
					SetPayer(r, r.Header.Get("Test-Signed-In"))
					next.ServeHTTP(w, r)
				default:
					w.WriteHeader(http.StatusPaymentRequired)
				}
			})
		}
	})
}

// A payer signed in gets its own job by GET, and never another payer's
// of the same job_id; a caller that does not sign in is asked to, and a
// refused sign-in is a 401 sign_in_rejected.
func TestSignedInPayerGetsOwnJob(t *testing.T) {
	ts := signInServer(t)
	ts.runner.set(func(_ context.Context, job *boxer.Job) (*boxer.Result, error) {
		res := fourResult()
		res.Stdout = boxer.Output{Data: job.Files[0].Content, Bytes: int64(len(job.Files[0].Content))}
		return res, nil
	})
	for _, payer := range []string{"0xAAAA", "0xBBBB"} {
		body := `{"job_id": "shared", "files": {"main.py": "` + payer + `"}}`
		if rec := ts.do(http.MethodPost, "/v1/run-python", body, "Test-Payer", payer); rec.Code != http.StatusOK {
			t.Fatalf("payer %s: %d %s", payer, rec.Code, rec.Body)
		}
	}
	runs := ts.runner.count()
	for _, c := range []struct{ as, stdout string }{{"0xAAAA", "0xAAAA"}, {"0xaaaa", "0xAAAA"}, {"0xBBBB", "0xBBBB"}} {
		rec := ts.do(http.MethodGet, "/v1/jobs/shared", "", "Test-Signed-In", c.as)
		var got RunResponse
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &got) != nil || got.Stdout != c.stdout {
			t.Fatalf("GET signed in as %s: %d %s, want stdout %s", c.as, rec.Code, rec.Body, c.stdout)
		}
	}
	wantError(t, ts.do(http.MethodGet, "/v1/jobs/shared", "", "Test-Signed-In", "0xCCCC"), http.StatusNotFound, boxer.ECodeNotFound)
	if rec := ts.do(http.MethodGet, "/v1/jobs/shared", ""); rec.Code != http.StatusPaymentRequired {
		t.Fatalf("GET without signing in: %d %s, want 402", rec.Code, rec.Body)
	}
	wantError(t, ts.do(http.MethodGet, "/v1/jobs/shared", "", "Test-Bad-Sign-In", "1"), http.StatusUnauthorized, boxer.ECodeSignInRejected)
	if ts.runner.count() != runs {
		t.Fatalf("a GET ran code: %d runs, want %d", ts.runner.count(), runs)
	}
	// A signed-in GET is no call to a run route: /v1/health counts none.
	ctx := context.Background()
	if err := ts.store.FlushCalls(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := ts.store.Stats(ctx, time.Time{}, 10); err != nil || st.Calls != 2 || st.UniquePayers != 2 {
		t.Fatalf("stats %+v, %v; want the 2 paid runs by 2 payers", st, err)
	}
}

// A priced route never takes a sign-in instead of a payment, and an API
// key goes around sign-in as it goes around payment.
func TestSignInOnlyOnUnpricedRoutes(t *testing.T) {
	var signIns []string
	ts := newTestServer(t, Config{}, func(d *Deps) {
		d.Payment = func(route string, next http.Handler, _ ErrorWriter) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusPaymentRequired) })
		}
		d.SignIn = func(route string, next http.Handler, _ ErrorWriter) http.Handler {
			signIns = append(signIns, route)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
		}
	})
	want := map[string]bool{"/v1/jobs/{job_id}": true, routeSessions + " GET": true, routeSession: true, routeSessionPut: true, routeSessionGet: true}
	for _, r := range signIns {
		if !want[r] {
			t.Errorf("sign-in wraps %s, a route that is priced or not a payer's", r)
		}
	}
	if len(signIns) != 6 { // GET and DELETE of routeSession
		t.Errorf("sign-in wraps %d routes (%v), want 6", len(signIns), signIns)
	}
	if rec := ts.do(http.MethodPost, "/v1/run-python", `{"files": {"main.py": "1"}}`, "SIGN-IN-WITH-X", "e30="); rec.Code != http.StatusPaymentRequired {
		t.Fatalf("a priced run with a sign-in and no payment: %d, want 402", rec.Code)
	}
	_, key, err := ts.store.AddKey(context.Background(), "ci", 0)
	if err != nil {
		t.Fatal(err)
	}
	rec := ts.do(http.MethodGet, "/v1/jobs/nosuch", "", "Authorization", "Bearer "+key)
	wantError(t, rec, http.StatusNotFound, boxer.ECodeNotFound)
}

// Sessions are the paying or signed-in payer's.
func TestSessionOwnerIsThePayer(t *testing.T) {
	for _, c := range []struct {
		st   reqState
		want string
	}{
		{reqState{key: "k1", payer: "0xAA"}, "key:k1"},
		{reqState{payer: "0xAbC"}, "payer:0xabc"},
		{reqState{}, ""},
	} {
		st := c.st
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r = r.WithContext(context.WithValue(r.Context(), stateKey{}, &st))
		if got := sessionOwner(r); got != c.want {
			t.Errorf("sessionOwner(%+v) = %q, want %q", c.st, got, c.want)
		}
	}
}
