package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"boxer"
	"boxer/internal/api"
)

// Config is what the MCP server needs.
type Config struct {
	// API is boxer's HTTP API: the api.Server in process, or a proxy to a
	// remote boxer. Tool calls are requests to it.
	API http.Handler
	// Version is boxer's, reported to clients at initialization.
	Version string
	// Logger receives the SDK's own log. Nil: discarded.
	Logger *slog.Logger
	// Priced says calls may be charged (x402): a tool's structured result
	// may then be x402's PaymentRequired instead, and the output schemas
	// say so, as clients check a result against them even when it is an
	// error.
	Priced bool
}

// Server is boxer's MCP server: its tools, bound to an API.
type Server struct {
	mcp *mcp.Server
	api http.Handler
}

// New makes the MCP server and registers its tools.
func New(cfg Config) (*Server, error) {
	if cfg.API == nil {
		return nil, errors.New("mcpserver: no API to call")
	}
	s := &Server{api: cfg.API}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "boxer", Title: "boxer: untrusted Python in a disposable sandbox", Version: cfg.Version},
		&mcp.ServerOptions{Logger: cfg.Logger, Instructions: instructions})
	tools := append([]sessionTool{
		{&mcp.Tool{Name: "run_python", Title: "Run Python files", Description: runPythonDescription}, RunPythonInput{}, api.RunResponse{}, s.runPython},
		{&mcp.Tool{Name: "exec", Title: "Run a Python snippet", Description: execDescription}, ExecInput{}, api.ExecResult{}, s.exec},
	}, s.sessionTools()...)
	for _, t := range tools {
		if err := s.add(t.tool, t.in, t.out, cfg.Priced, t.h); err != nil {
			return nil, fmt.Errorf("mcpserver: tool %s: %w", t.tool.Name, err)
		}
	}
	return s, nil
}

// MCP is the SDK's server, for a transport to run (stdio) or serve.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// HTTPOptions shape the streamable HTTP transport.
type HTTPOptions struct {
	// MaxBody bounds a request: a tool call carries at most a
	// /v1/run-python body and its JSON-RPC envelope.
	MaxBody int64
	// Before, if set, wraps the transport: boxer serve passes the API's
	// own checks of a request and reading of its body
	// (api.Server.BodyFirst), so that /mcp refuses what the API's routes
	// refuse before a handler, as they do.
	Before func(http.Handler) http.Handler
	Logger *slog.Logger
}

// HTTPHandler serves the streamable HTTP transport. It is stateless: each
// POST is a whole exchange, so any boxer node behind a load balancer can
// answer any call, and nothing is kept between calls.
func (s *Server) HTTPHandler(o HTTPOptions) http.Handler {
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Stateless:                    true,
		JSONResponse:                 true,
		Logger:                       o.Logger,
		MaxRequestBodyBytes:          o.MaxBody,
		PropagateRequestCancellation: true,
		// boxer's own guard (api.HostGuard) does this for every route,
		// with the names a local reverse proxy forwards allowed.
		DisableLocalhostProtection: true,
	})
	h = noBatches(h)
	if o.Before != nil {
		h = o.Before(h)
	}
	return withOrigin(h)
}

// noBatches refuses a JSON-RPC batch, which older protocol versions allow:
// one POST would run as many tool calls at once as it holds (tens of
// thousands in 8 MiB), past every bound boxer sets on a connection. Only
// the body's first byte that is not white space is looked at.
func noBatches(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		br := bufio.NewReader(r.Body)
		for {
			c, err := br.ReadByte()
			if err != nil {
				break // empty: the transport says so
			}
			if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
				continue
			}
			if c == '[' {
				b, _ := json.Marshal(map[string]any{"success": false, "error": boxer.Errorf(boxer.ECodeInvalidRequest,
					"JSON-RPC batches are not served: send one message a request")})
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write(b)
				return
			}
			_ = br.UnreadByte()
			break
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{br, r.Body}
		next.ServeHTTP(w, r)
	})
}

// toolHandler turns a tool call's checked arguments into its result.
type toolHandler func(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error)

// add registers a tool whose arguments are checked against in's schema
// before h sees them, and whose structured result is out's.
func (s *Server) add(t *mcp.Tool, in, out any, priced bool, h toolHandler) error {
	inSchema, err := inputSchema(in)
	if err != nil {
		return err
	}
	// Arguments are checked here for their shape (types, names); their
	// values are the API's to judge, which says what is wrong in its own
	// words and codes ("memory_mb: 5 is out of range; allowed: 64 to
	// 1024", unsupported_language), while the published schema states the
	// same limits.
	shape, err := shapeOnly(inSchema)
	if err != nil {
		return err
	}
	resolved, err := shape.Resolve(nil)
	if err != nil {
		return err
	}
	outSchema, err := api.SchemaFor(out)
	if err != nil {
		return err
	}
	if priced {
		outSchema = &jsonschema.Schema{Type: "object", AnyOf: []*jsonschema.Schema{outSchema, paymentRequiredSchema()}}
	}
	t.InputSchema, t.OutputSchema = inSchema, outSchema
	s.mcp.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		var v any
		if err := json.Unmarshal(args, &v); err != nil {
			return toolError(boxer.ECodeInvalidRequest, "arguments are not JSON: "+err.Error()), nil
		}
		if err := resolved.Validate(v); err != nil {
			return toolError(boxer.ECodeInvalidRequest, "arguments: "+err.Error()), nil
		}
		return h(ctx, req, args)
	})
	return nil
}

// paymentRequiredSchema is the shape of x402's PaymentRequired, as much of
// it as a client needs to tell it from a result.
func paymentRequiredSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:        "object",
		Description: "x402 PaymentRequired: pay one of accepts and call again with the payment in _meta[\"x402/payment\"]",
		Required:    []string{"x402Version", "accepts"},
		Properties: map[string]*jsonschema.Schema{
			"x402Version": {Type: "integer"},
			"error":       {Type: "string"},
			"resource":    {Type: "object"},
			"accepts":     {Type: "array", Items: &jsonschema.Schema{Type: "object"}},
			"extensions":  {Type: "object"},
		},
	}
}

// inputSchema is a tool's arguments' schema: the API request's own (with
// its limits), and for run_python code beside it, files then optional.
func inputSchema(in any) (*jsonschema.Schema, error) {
	switch in.(type) {
	case RunPythonInput:
		s, err := api.SchemaFor(api.RunPythonRequest{})
		if err != nil {
			return nil, err
		}
		code, err := jsonschema.For[string](nil)
		if err != nil {
			return nil, err
		}
		code.Description = "Python source, saved as main.py (the default command runs it); give code, files, or both"
		s.Properties["code"] = code
		// A tool call answers with its result: no background runs.
		for _, p := range []string{"async", "webhook_url"} {
			delete(s.Properties, p)
			s.PropertyOrder = slices.DeleteFunc(s.PropertyOrder, func(q string) bool { return q == p })
		}
		s.PropertyOrder = append([]string{"code"}, s.PropertyOrder...)
		return s, nil
	default:
		return api.SchemaFor(in)
	}
}

// shapeOnly is a copy of s without the bounds and enumerations of its
// properties.
func shapeOnly(s *jsonschema.Schema) (*jsonschema.Schema, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var c jsonschema.Schema
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	for _, p := range c.Properties {
		p.Minimum, p.Maximum, p.MinProperties, p.MaxProperties, p.MinItems, p.MaxItems, p.Enum = nil, nil, nil, nil, nil, nil, nil
	}
	return &c, nil
}

// toolError is a failed tool call whose text starts with the stable code.
func toolError(code, msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: code + ": " + msg}}}
}

const instructions = `boxer runs untrusted Python 3 in a disposable Linux sandbox: no network, ` +
	`a read-only system, hard limits on CPU, memory, processes, time and output. ` +
	`Use exec for a snippet and run_python for files, stdin, a command such as ` +
	`"python -m pytest", limits, or files to bring back (artifact_paths). ` +
	`Every run_python or exec call starts from a clean sandbox: nothing persists between calls. ` +
	`To work in steps (load data, look, transform, plot), start a session with session_create ` +
	`and run each step with session_exec: variables, imports and files persist in it.`

const runPythonDescription = `Runs Python files in a fresh sandbox (no network) and returns exit code, ` +
	`stdout, stderr and the files named in artifact_paths; PNG artifacts are also shown as images. ` +
	`Give code (saved as main.py and run as "python main.py") or files, or both. ` +
	`A program that fails, times out or runs out of memory is still a result: read status and exit_code.`

const execDescription = `Runs a Python snippet in a fresh sandbox (no network) and returns stdout, ` +
	`stderr, exit code and status. For files, stdin, a command or artifacts use run_python.`
