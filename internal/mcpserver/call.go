package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"boxer"
	"boxer/internal/x402"
)

// The x402 MCP transport's _meta keys: the payment a client attaches to a
// tool call, and the settlement boxer returns with the result.
const (
	metaPayment         = "x402/payment"
	metaPaymentResponse = "x402/payment-response"
	// metaSignIn carries a sign-in-with-x proof (the object the HTTP
	// transport sends base64 in SIGN-IN-WITH-X), for the tools of routes
	// a payer reaches by signing in. x402's MCP transport names no key
	// for it; this one follows x402/payment's pattern.
	metaSignIn = "x402/sign-in-with-x"
)

// forwarded are the headers of an MCP HTTP request that its tool calls'
// API requests carry too: who the caller is (a key, later; a proxy's
// client address) and what it is.
var forwarded = []string{"Authorization", "X-Forwarded-For", "User-Agent"}

// origin is where an MCP HTTP request came from, kept for its tool calls.
type origin struct{ host, remote string }

type originKey struct{}

// answer is the API's reply to a tool call's request.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// call makes the API request for a tool call: route, body, the forwarded
// headers, and the x402 payment if the call carries one (as the HTTP
// transport's PAYMENT-SIGNATURE header, which the API checks exactly as it
// checks an HTTP caller's).
func (s *Server) call(ctx context.Context, req *mcp.CallToolRequest, route string, body []byte) answer {
	return s.callMethod(ctx, req, http.MethodPost, route, body)
}

// callMethod is call with another method; a nil body is none.
func (s *Server) callMethod(ctx context.Context, req *mcp.CallToolRequest, method, path string, body []byte) answer {
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	r, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return errAnswer(boxer.ECodeInternal, "could not make the API request")
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	r.RemoteAddr = "mcp"
	if o, ok := ctx.Value(originKey{}).(origin); ok {
		r.Host, r.RemoteAddr = o.host, o.remote
	}
	if req.Extra != nil {
		for _, h := range forwarded {
			if v := req.Extra.Header.Values(h); len(v) > 0 {
				r.Header[h] = v
			}
		}
	}
	if p, ok := req.Params.Meta[metaPayment]; ok {
		h, err := x402.EncodeHeader(p)
		if err != nil {
			return errAnswer(boxer.ECodeInvalidRequest, "_meta[\"x402/payment\"] cannot be encoded: "+err.Error())
		}
		r.Header.Set("PAYMENT-SIGNATURE", h)
	}
	if p, ok := req.Params.Meta[metaSignIn]; ok {
		h, err := x402.EncodeHeader(p)
		if err != nil {
			return errAnswer(boxer.ECodeInvalidRequest, "_meta[\"x402/sign-in-with-x\"] cannot be encoded: "+err.Error())
		}
		r.Header.Set(x402.HeaderSignInWithX, h)
	}
	rec := &recorder{header: http.Header{}}
	s.api.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return answer{status: rec.status, header: rec.header, body: rec.body.Bytes()}
}

// errAnswer is an answer the API would have given had the request reached it.
func errAnswer(code, msg string) answer {
	b, _ := json.Marshal(map[string]any{"success": false, "error": map[string]string{"code": code, "message": msg}})
	return answer{status: http.StatusBadRequest, header: http.Header{}, body: b}
}

// result starts a successful tool result with text, carrying the payment's
// settlement if there was one.
func (a answer) result(text string) *mcp.CallToolResult {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	a.settlement(res)
	return res
}

// failure is the tool error for an answer other than 200. A 402 carries
// the PaymentRequired object as structured content (x402's MCP transport),
// which a client pays and retries with; any other refusal says its stable
// code first.
func (a answer) failure() *mcp.CallToolResult {
	if a.status == http.StatusPaymentRequired {
		var required map[string]any
		if h := a.header.Get("PAYMENT-REQUIRED"); h != "" && x402.DecodeHeader(h, &required) == nil {
			text, _ := json.Marshal(required)
			res := &mcp.CallToolResult{IsError: true, StructuredContent: required,
				Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}
			a.settlement(res)
			return res
		}
	}
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(a.body, &body) != nil || body.Error.Code == "" {
		body.Error.Code, body.Error.Message = boxer.ECodeInternal, http.StatusText(a.status)
	}
	res := toolError(body.Error.Code, body.Error.Message)
	if ra := a.header.Get("Retry-After"); ra != "" {
		res.Content = append(res.Content, &mcp.TextContent{Text: "retry after " + ra + " s"})
	}
	a.settlement(res)
	return res
}

// settlement puts the API's PAYMENT-RESPONSE, if any, in res's _meta.
func (a answer) settlement(res *mcp.CallToolResult) {
	var settled map[string]any
	if h := a.header.Get("PAYMENT-RESPONSE"); h != "" && x402.DecodeHeader(h, &settled) == nil {
		res.Meta = mcp.Meta{metaPaymentResponse: settled}
	}
}

// recorder is the response writer of an in-process API request.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

// withOrigin keeps an MCP HTTP request's host and address for the API
// requests its tool calls make (a 402's resource URL, the access log).
func withOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), originKey{}, origin{host: r.Host, remote: r.RemoteAddr})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}
