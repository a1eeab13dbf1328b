package mcpserver

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"boxer/internal/x402"
)

// A sign-in proof in _meta["x402/sign-in-with-x"] reaches the API as the
// HTTP transport's SIGN-IN-WITH-X header, so that a payer's session tools
// work over MCP as over HTTP.
func TestSignInProofReachesTheAPI(t *testing.T) {
	var header string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Get(x402.HeaderSignInWithX)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"session_id":"ses_x","deleted":true}`))
	})
	proof := map[string]any{"domain": "boxer.test", "address": "0xabc", "nonce": "n", "signature": "0x01"}
	res := callTool(t, connect(t, h), &mcp.CallToolParams{Name: "session_delete", Arguments: map[string]any{"session_id": "ses_x"},
		Meta: mcp.Meta{metaSignIn: proof}})
	if res.IsError {
		t.Fatalf("result %+v", res)
	}
	var sent map[string]any
	if err := x402.DecodeHeader(header, &sent); err != nil || !reflect.DeepEqual(sent, proof) {
		t.Fatalf("the API got SIGN-IN-WITH-X %q (%v), want %v", header, err, proof)
	}
}
