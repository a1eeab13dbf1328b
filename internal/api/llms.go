package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"boxer"
)

// llmsTxt is GET /llms.txt: what boxer is and how to call it, for a model
// reading it, in the style of the marketplace listings of the services
// boxer speaks for (seed 001). It is written from routeDocs, the source of
// the OpenAPI document, with base the service's own URL.
func llmsTxt(info DocInfo, base string, exec, run limitsDoc) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# boxer: untrusted Python in a disposable sandbox\n\n")
	w("> boxer runs untrusted Python 3 in a disposable Linux sandbox and returns stdout, stderr, exit code and the files the program wrote. No network, a read-only system, hard limits on CPU, memory, processes, time and output; every call starts clean, unless you start a session: one interpreter that keeps its state between calls, as a notebook kernel does.\n\n")
	w("## Facts\n\n")
	for _, rd := range routeDocs {
		if rd.run {
			w("- Endpoint: %s %s%s (%s)\n", rd.method, base, rd.path, rd.summary)
		}
	}
	w("- MCP: %s/mcp (streamable HTTP), tools run_python, exec and session_create, session_exec, session_fork, session_write_files, session_read_file, session_list, session_delete\n", base)
	w("- Streaming: send Accept: text/event-stream to /v1/exec, /v1/run-python or a session's exec for stdout and stderr events as the program writes, then a result event\n")
	w("- Background runs: /v1/run-python with \"async\": true answers 202 with a job_id; poll GET /v1/jobs/{job_id} (queued, running, then the result) or give webhook_url\n")
	w("- OpenAPI: %s/openapi.json\n", base)
	switch {
	case len(info.Prices) > 0:
		for _, rd := range routeDocs {
			if p, ok := info.Prices[rd.path]; ok {
				w("- Price of %s: $%s a call, paid with x402 (%s, asset %s); free with an API key\n", rd.path, p, info.Network, info.Asset)
			}
		}
		for _, n := range info.AlsoPaidOn {
			w("- Also payable with x402 on %s, while the facilitator offers it: each 402's accepts lists the networks it takes now\n", n)
		}
		w("- x402 discovery: %s%s (each priced route and what its 402 challenge asks for)\n", base, routeDiscovery)
	case info.KeysRequired:
		w("- Price: free, with an API key (Authorization: Bearer <key>)\n")
	default:
		w("- Price: free\n")
	}
	w("- Version: %s\n\n", info.Version)

	w("## Limits\n\n")
	w("- /v1/exec: %s\n", exec)
	w("- /v1/run-python: %s by default; a request may ask for cpus 0.1 to 2, memory_mb 64 to 1024, timeout_seconds 1 to 30\n", run)
	w("- Files: 1 to 64 (run-python), code at most 64 KiB (exec); at most 16 artifact paths\n\n")

	w("## Endpoints\n\n")
	for _, rd := range routeDocs {
		w("### %s %s\n\n%s\n\n", rd.method, rd.path, rd.description)
		if rd.request != nil {
			body, _ := json.Marshal(rd.example)
			auth := ""
			if info.KeysRequired {
				auth = " -H 'Authorization: Bearer $BOXER_KEY'"
			}
			w("```sh\ncurl -s %s%s -H 'Content-Type: application/json'%s -d '%s'\n```\n\n", base, rd.path, auth, body)
		}
		if rd.okExample != nil {
			out, _ := json.Marshal(rd.okExample)
			w("Answer (200):\n\n```json\n%s\n```\n\n", out)
		}
	}

	w("## Known failure modes\n\n")
	failures := []string{
		"The program fails, times out or runs out of memory: still a 200 with a result; read status (ok, nonzero_exit, timeout, oom, signaled), exit_code and stderr",
		"Output beyond the limit: kept up to it, the rest counted; stdout_truncated or stderr_truncated is true",
		"Network access from the program: refused, there is no network in the sandbox",
		"A requested artifact the program did not write: listed in missing_artifacts with the reason",
		"A malformed request: 400 invalid_request or invalid_json, naming the field; 413 code_too_large or payload_too_large",
		"No key, an unknown or revoked key: 401 unauthorized; a key over its rate: 429 rate_limited with Retry-After",
		"Payment missing or invalid (when priced): 402 with PAYMENT-REQUIRED; pay and send PAYMENT-SIGNATURE",
		"A paid call retried (when priced): put an id in the payment's payment-identifier extension (16-128 of A-Z a-z 0-9 _ -); a retry with the same id and request gets the first answer back (Idempotent-Replayed: true) and is not charged again; the same id with another request: 409 payment_id_conflict; an invalid id: 400 invalid_payment_id; an id whose first call another server is still answering: 409 payment_id_in_flight, retry shortly",
		"Overload: 503 busy with Retry-After; shutting down: 503 unavailable",
		"The same job_id with a different request: 409 job_id_conflict; with the same request, the kept result (202 while it runs), not charged again when priced",
		"A cell sent to a session still running another: 409 session_busy; a session that ended (idle, lifetime, deleted, out of memory): 410 session_ended; one lost when the server holding it stopped or restarted: 410 session_lost; on a cluster any node forwards a session's calls to the node holding it",
		"A fork of a session that has a thread or process of its own still running, or memory shared with another process: 409 fork_refused; the session goes on unharmed",
	}
	if info.SignIn {
		failures = append(failures, "Your own kept job (GET /v1/jobs/{job_id}) or session without paying again (when priced): call it without a key; the 402's sign-in-with-x extension holds a challenge: sign it with the paying address (EIP-4361 for EVM, ed25519 for Solana) and send it in SIGN-IN-WITH-X; a bad, expired or reused proof: 401 sign_in_rejected")
	}
	for _, f := range failures {
		w("- %s\n", f)
	}
	return b.String()
}

// limitsDoc is a route's limits, as llms.txt states them.
type limitsDoc struct {
	CPUs      float64
	MemoryMiB int64
	TimeoutS  float64
}

func (l limitsDoc) String() string {
	return fmt.Sprintf("%g CPU, %d MiB of memory, %gs", l.CPUs, l.MemoryMiB, l.TimeoutS)
}

func (s *Server) docInfo(r *http.Request) DocInfo {
	info := s.deps.Doc
	info.Version = s.cfg.Version
	info.KeysRequired = s.keysRequired(r.Context())
	return info
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	b, err := OpenAPI(s.docInfo(r))
	if err != nil {
		s.internalError(w, r, "openapi", err)
		return
	}
	writeBody(w, http.StatusOK, b)
}

func (s *Server) handleLLMsTxt(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	lim := func(l boxer.Limits) limitsDoc {
		return limitsDoc{CPUs: l.CPUs, MemoryMiB: l.MemoryBytes >> 20, TimeoutS: l.WallTime.Seconds()}
	}
	text := llmsTxt(s.docInfo(r), scheme+"://"+r.Host, lim(s.cfg.ExecLimits), lim(s.cfg.RunLimits))
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(text))
}
