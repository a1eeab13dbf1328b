package api

import (
	"net/http"
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
