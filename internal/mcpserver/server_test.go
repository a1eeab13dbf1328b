package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"boxer"
	"boxer/internal/api"
	"boxer/internal/x402"
)

// seen is what the stub API received.
type seen struct {
	path    string
	body    map[string]any
	payment string
}

// stubAPI answers every request with status, headers and body, and
// records what it got. The real API is under test end to end
// (test/mcpe2e); here only the translation is.
func stubAPI(t *testing.T, status int, header map[string]string, body any) (http.Handler, *seen) {
	t.Helper()
	got := &seen{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.path = r.URL.Path
		got.payment = r.Header.Get("PAYMENT-SIGNATURE")
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &got.body); err != nil {
			t.Errorf("API request body %q: %v", b, err)
		}
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}), got
}

func connect(t *testing.T, h http.Handler) *mcp.ClientSession {
	t.Helper()
	return connectPriced(t, h, false)
}

func connectPriced(t *testing.T, h http.Handler, priced bool) *mcp.ClientSession {
	t.Helper()
	s, err := New(Config{API: h, Version: "test", Priced: priced})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	if _, err := s.MCP().Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, p *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func text(res *mcp.CallToolResult, i int) string {
	if i >= len(res.Content) {
		return ""
	}
	if tc, ok := res.Content[i].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

func okRun() api.RunResponse {
	return api.NewRunResponse("job_1", &boxer.Result{Status: boxer.StatusOK, Stdout: boxer.Output{Data: []byte("hi\n")}})
}

// code becomes main.py, and the API gets exactly /v1/run-python's fields.
func TestRunPythonFoldsCodeIntoMainPy(t *testing.T) {
	h, got := stubAPI(t, 200, nil, okRun())
	res := callTool(t, connect(t, h), &mcp.CallToolParams{Name: "run_python", Arguments: map[string]any{
		"code": "print('hi')", "files": map[string]string{"utils.py": "x = 1"}, "timeout_seconds": 5}})
	if res.IsError || text(res, 0) != "status ok, exit code 0, 0 ms\n--- stdout ---\nhi\n" {
		t.Fatalf("result %+v %q", res, text(res, 0))
	}
	want := map[string]any{"files": map[string]any{"main.py": "print('hi')", "utils.py": "x = 1"}, "timeout_seconds": 5.0}
	if got.path != "/v1/run-python" || !reflect.DeepEqual(got.body, want) {
		t.Fatalf("API got %s %v, want /v1/run-python %v", got.path, got.body, want)
	}
}

// Refusals made before any API call, each with the API's code.
func TestRunPythonRefusesBeforeCalling(t *testing.T) {
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"nothing to run", map[string]any{"stdin": "x"}, "invalid_request: give code, or files to run"},
		{"code and main.py", map[string]any{"code": "1", "files": map[string]string{"main.py": "2"}}, "invalid_request: code is main.py's content: give one or the other"},
		{"wrong type", map[string]any{"code": 1}, "invalid_request: arguments: "},
		{"unknown field", map[string]any{"code": "1", "cpu": 1}, "invalid_request: arguments: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, got := stubAPI(t, 200, nil, okRun())
			res := callTool(t, connect(t, h), &mcp.CallToolParams{Name: "run_python", Arguments: tc.args})
			if !res.IsError || !strings.HasPrefix(text(res, 0), tc.want) || res.StructuredContent != nil {
				t.Fatalf("result %+v %q, want an error starting %q", res, text(res, 0), tc.want)
			}
			if got.path != "" {
				t.Fatalf("the API was called (%s)", got.path)
			}
		})
	}
}

// An unpaid call is a tool error whose structured content is the 402's
// PaymentRequired; a paid one carries the payment to the API as the HTTP
// transport's header, and the settlement back in _meta (x402's MCP
// transport).
func TestPaymentsFollowX402MCPTransport(t *testing.T) {
	required := map[string]any{"x402Version": 2.0, "error": "PAYMENT-SIGNATURE header is required",
		"accepts": []any{map[string]any{"scheme": "exact", "network": "eip155:8453", "amount": "10000"}}}
	h402, _ := x402.EncodeHeader(required)
	h, _ := stubAPI(t, http.StatusPaymentRequired, map[string]string{"PAYMENT-REQUIRED": h402},
		map[string]any{"success": false, "error": map[string]string{"code": "payment_required", "message": "pay"}})
	cs := connectPriced(t, h, true)
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		// Clients check an error's structured content against the schema too.
		if b, _ := json.Marshal(tool.OutputSchema); !strings.Contains(string(b), `"anyOf"`) || !strings.Contains(string(b), "x402 PaymentRequired") {
			t.Fatalf("%s's output schema does not admit a PaymentRequired: %s", tool.Name, b)
		}
	}
	res := callTool(t, cs, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": "1"}})
	if sc, _ := json.Marshal(res.StructuredContent); !res.IsError || !jsonEqual(t, sc, required) {
		t.Fatalf("unpaid: %+v, structured %s", res, sc)
	}

	payment := map[string]any{"x402Version": 2.0, "payload": map[string]any{"signature": "0xabc"}}
	settled := map[string]any{"success": true, "transaction": "0x123", "network": "eip155:8453", "payer": "0xpayer"}
	hSettled, _ := x402.EncodeHeader(settled)
	h, got := stubAPI(t, 200, map[string]string{"PAYMENT-RESPONSE": hSettled},
		map[string]any{"success": true, "result": json.RawMessage(`{"stdout":"1\n","stderr":"","exitCode":0,"durationMs":1,"timedOut":false,"status":"ok","oomKilled":false,"oomKills":0,"stdoutTruncated":false,"stderrTruncated":false,"cpuTimeMs":1,"memoryPeakBytes":1,"signal":null,"timing":{"queueMs":0,"acquireMs":0,"runMs":1,"collectMs":0}}`)})
	res = callTool(t, connect(t, h), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": "print(1)"},
		Meta: mcp.Meta{metaPayment: payment}})
	var sent map[string]any
	if err := x402.DecodeHeader(got.payment, &sent); err != nil || !reflect.DeepEqual(sent, payment) {
		t.Fatalf("the API got PAYMENT-SIGNATURE %q (%v), want %v", got.payment, err, payment)
	}
	meta, _ := json.Marshal(res.Meta[metaPaymentResponse])
	if res.IsError || !jsonEqual(t, meta, settled) {
		t.Fatalf("paid: %+v, settlement %s", res, meta)
	}
}

// A refusal says its code first, and when to retry if the API said.
func TestRefusalCarriesCodeAndRetryAfter(t *testing.T) {
	h, _ := stubAPI(t, http.StatusServiceUnavailable, map[string]string{"Retry-After": "2"},
		map[string]any{"success": false, "error": map[string]string{"code": "busy", "message": "all 4 run slots are taken"}})
	res := callTool(t, connect(t, h), &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"code": "1"}})
	if !res.IsError || text(res, 0) != "busy: all 4 run slots are taken" || text(res, 1) != "retry after 2 s" {
		t.Fatalf("result %+v", res)
	}
}

func jsonEqual(t *testing.T, got []byte, want any) bool {
	t.Helper()
	w, _ := json.Marshal(want)
	var a, b any
	return json.Unmarshal(got, &a) == nil && json.Unmarshal(w, &b) == nil && reflect.DeepEqual(a, b)
}
