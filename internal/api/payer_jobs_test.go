package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// With payments on, a job_id belongs to its payer: another payer using the
// same job_id runs their own job and never sees the first one's paid
// result, and GET /v1/jobs (which carries no payer) serves nothing.
func TestJobIDsArePerPayer(t *testing.T) {
	ts := newTestServer(t, Config{}, func(d *Deps) {
		// A stand-in for the x402 layer: the payer comes in a header.
		d.Payment = func(route string, next http.Handler, _ ErrorWriter) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				SetPayer(r, r.Header.Get("Test-Payer"))
				next.ServeHTTP(w, r)
			})
		}
	})
	body := `{"job_id": "shared", "files": {"main.py": "print(2 + 2)"}}`
	for i, payer := range []string{"0xAAAA", "0xBBBB", "0xaaaa"} {
		rec := ts.do(http.MethodPost, "/v1/run-python", body, "Test-Payer", payer)
		if rec.Code != http.StatusOK {
			t.Fatalf("payer %s: %d %s", payer, rec.Code, rec.Body)
		}
		// 0xAAAA and 0xBBBB each run once; 0xaaaa is 0xAAAA again (addresses
		// compare case-insensitively) and gets the stored result.
		if want := min(i+1, 2); ts.runner.count() != want {
			t.Fatalf("after payer %s: %d runs, want %d", payer, ts.runner.count(), want)
		}
	}
	wantError(t, ts.do(http.MethodGet, "/v1/jobs/shared", ""), http.StatusNotFound, "not_found")

	// Solana addresses are base58, where case is part of the key: two
	// spellings that differ only in case are two payers.
	for i, payer := range []string{"9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin", "9XQEWVG816BUX9EPJHMAT23YVVM2ZWBRRPZB9PUSVFIN"} {
		if rec := ts.do(http.MethodPost, "/v1/run-python", body, "Test-Payer", payer); rec.Code != http.StatusOK {
			t.Fatalf("payer %s: %d %s", payer, rec.Code, rec.Body)
		}
		if want := 3 + i; ts.runner.count() != want {
			t.Fatalf("after Solana payer %s: %d runs, want %d", payer, ts.runner.count(), want)
		}
	}
}

// settlingPayment stands in for the x402 layer: the payer comes in a
// Test-Payer header, and the payment settles if Test-Settles is "yes". As
// x402 does, it buffers the answer, tells the handler's AfterSettlement
// hooks the outcome, and releases the answer only if it settled (402
// otherwise). SignIn stands in for sign-in: Test-Payer is who signed in.
func settlingPayment(d *Deps) {
	d.Payment = func(route string, next http.Handler, _ ErrorWriter) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			SetPayer(r, r.Header.Get("Test-Payer"))
			var hooks []func(bool)
			SetSettlement(r, func(f func(bool)) { hooks = append(hooks, f) })
			buf := httptest.NewRecorder()
			next.ServeHTTP(buf, r)
			settled := buf.Code < 300 && r.Header.Get("Test-Settles") == "yes"
			for _, f := range hooks {
				f(settled)
			}
			if !settled && buf.Code < 300 {
				w.WriteHeader(http.StatusPaymentRequired)
				return
			}
			for k, v := range buf.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(buf.Code)
			w.Write(buf.Body.Bytes())
		})
	}
	d.SignIn = func(route string, next http.Handler, _ ErrorWriter) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			SetPayer(r, r.Header.Get("Test-Payer"))
			next.ServeHTTP(w, r)
		})
	}
}

// A paid run's result is kept only once its payment settles. One that does
// not settle leaves nothing to fetch, though the payer may sign in (found
// by review: the result was kept before settlement, and served free by
// GET), and its job_id runs again on a paid retry.
func TestUnsettledRunIsNotKept(t *testing.T) {
	ts := newTestServer(t, Config{}, settlingPayment)
	body := `{"job_id": "paid-once", "files": {"main.py": "print(2 + 2)"}}`
	const payer = "0xAAAA"

	if rec := ts.do(http.MethodPost, "/v1/run-python", body, "Test-Payer", payer, "Test-Settles", "no"); rec.Code != http.StatusPaymentRequired {
		t.Fatalf("unsettled run: %d %s", rec.Code, rec.Body)
	}
	wantError(t, ts.do(http.MethodGet, "/v1/jobs/paid-once", "", "Test-Payer", payer), http.StatusNotFound, "not_found")

	rec := ts.do(http.MethodPost, "/v1/run-python", body, "Test-Payer", payer, "Test-Settles", "yes")
	if rec.Code != http.StatusOK || ts.runner.count() != 2 {
		t.Fatalf("paid retry: %d after %d runs, want 200 after 2: %s", rec.Code, ts.runner.count(), rec.Body)
	}
	got := ts.do(http.MethodGet, "/v1/jobs/paid-once", "", "Test-Payer", payer)
	if got.Code != http.StatusOK || got.Body.String() != rec.Body.String() {
		t.Fatalf("GET after the paid run: %d %s", got.Code, got.Body)
	}
}

// A paid async job starts only once its 202 is paid for: one whose payment
// does not settle runs nothing and keeps nothing (nor calls a webhook,
// which would hand its result out), and its job_id is free again.
func TestUnsettledAsyncJobNeverRuns(t *testing.T) {
	ts := newTestServer(t, Config{}, settlingPayment)
	body := `{"job_id": "bg", "async": true, "files": {"main.py": "print(2 + 2)"}}`
	const payer = "0xAAAA"
	if rec := ts.do(http.MethodPost, "/v1/run-python", body, "Test-Payer", payer, "Test-Settles", "no"); rec.Code != http.StatusPaymentRequired {
		t.Fatalf("unsettled async: %d %s", rec.Code, rec.Body)
	}
	ts.waitAsync()
	if n := ts.runner.count(); n != 0 {
		t.Fatalf("an unpaid async job ran %d times", n)
	}
	wantError(t, ts.do(http.MethodGet, "/v1/jobs/bg", "", "Test-Payer", payer), http.StatusNotFound, "not_found")

	if rec := ts.do(http.MethodPost, "/v1/run-python", body, "Test-Payer", payer, "Test-Settles", "yes"); rec.Code != http.StatusAccepted {
		t.Fatalf("paid async: %d %s", rec.Code, rec.Body)
	}
	ts.waitAsync()
	if got := ts.do(http.MethodGet, "/v1/jobs/bg", "", "Test-Payer", payer); got.Code != http.StatusOK || ts.runner.count() != 1 {
		t.Fatalf("GET after the paid async job: %d after %d runs: %s", got.Code, ts.runner.count(), got.Body)
	}
}

// waitAsync waits for the async jobs started so far to be done.
func (ts *testServer) waitAsync() { ts.Server.async.Wait() }
