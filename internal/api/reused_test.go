package api

import (
	"net/http"
	"testing"
)

// A job_id's kept result is an earlier request's work: Reused says so to
// the payment hook, which does not charge it; a run of its own is not.
func TestReusedJobIsMarked(t *testing.T) {
	var reused []bool
	ts := newTestServer(t, Config{}, func(d *Deps) {
		d.Payment = func(route string, next http.Handler, _ ErrorWriter) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				SetPayer(r, r.Header.Get("Test-Payer"))
				next.ServeHTTP(w, r)
				reused = append(reused, Reused(r))
			})
		}
	})
	body := `{"job_id": "reused-1", "files": {"main.py": "print(2 + 2)"}}`
	for _, payer := range []string{"0xAAAA", "0xAAAA", "0xBBBB"} {
		if rec := ts.do(http.MethodPost, "/v1/run-python", body, "Test-Payer", payer); rec.Code != http.StatusOK {
			t.Fatalf("payer %s: %d %s", payer, rec.Code, rec.Body)
		}
	}
	if rec := ts.do(http.MethodPost, "/v1/run-python", `{"files": {"main.py": "print(1)"}}`, "Test-Payer", "0xAAAA"); rec.Code != http.StatusOK {
		t.Fatalf("no job_id: %d %s", rec.Code, rec.Body)
	}
	// 0xAAAA runs, 0xAAAA replays, 0xBBBB runs its own, a run without job_id.
	if want := []bool{false, true, false, false}; len(reused) != 4 || reused[0] != want[0] || reused[1] != want[1] || reused[2] != want[2] || reused[3] != want[3] {
		t.Fatalf("Reused = %v, want %v", reused, want)
	}
	if ts.runner.count() != 3 {
		t.Fatalf("%d runs, want 3", ts.runner.count())
	}
}
