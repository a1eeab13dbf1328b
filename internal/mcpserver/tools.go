package mcpserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"boxer"
	"boxer/internal/api"
)

// RunPythonInput is the run_python tool's arguments: /v1/run-python's
// request (seed 004), plus code, which is main.py's content.
type RunPythonInput struct {
	Code string `json:"code,omitempty" jsonschema:"Python source, saved as main.py; the default command runs it"`
	api.RunPythonRequest
}

// ExecInput is the exec tool's arguments: /v1/exec's request (seed 000).
type ExecInput = api.ExecRequest

// runPython calls POST /v1/run-python.
func (s *Server) runPython(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error) {
	var in RunPythonInput
	if err := json.Unmarshal(args, &in); err != nil {
		return toolError(boxer.ECodeInvalidRequest, err.Error()), nil
	}
	if in.Code == "" && len(in.Files) == 0 {
		return toolError(boxer.ECodeInvalidRequest, "give code, or files to run"), nil
	}
	in.Async, in.WebhookURL = nil, nil // not the tool's (see inputSchema)
	if in.Code != "" {
		if _, ok := in.Files["main.py"]; ok {
			return toolError(boxer.ECodeInvalidRequest, "code is main.py's content: give one or the other"), nil
		}
		if in.Files == nil {
			in.Files = map[string]string{}
		}
		in.Files["main.py"], in.Code = in.Code, "" // /v1/run-python has no code field
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	answer := s.call(ctx, req, "/v1/run-python", body)
	if answer.status != http.StatusOK {
		return answer.failure(), nil
	}
	var out api.RunResponse
	if err := json.Unmarshal(answer.body, &out); err != nil {
		return nil, fmt.Errorf("decode /v1/run-python's answer: %w", err)
	}
	res := answer.result(summary(string(out.Status), out.ExitCode, out.DurationMs, out.Stdout, out.Stderr, out.StdoutTruncated, out.StderrTruncated))
	for _, a := range out.Artifacts {
		if png := pngOf(a); png != nil {
			res.Content = append(res.Content, &mcp.ImageContent{Data: png, MIMEType: "image/png",
				Meta: mcp.Meta{"path": a.Path}})
		}
	}
	if len(out.Artifacts)+len(out.MissingArtifacts) > 0 {
		res.Content = append(res.Content, &mcp.TextContent{Text: artifactList(out)})
	}
	res.StructuredContent = json.RawMessage(answer.body)
	return res, nil
}

// exec calls POST /v1/exec.
func (s *Server) exec(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error) {
	var in ExecInput
	if err := json.Unmarshal(args, &in); err != nil {
		return toolError(boxer.ECodeInvalidRequest, err.Error()), nil
	}
	if in.Language == "" {
		in.Language = "python"
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	answer := s.call(ctx, req, "/v1/exec", body)
	if answer.status != http.StatusOK {
		return answer.failure(), nil
	}
	var out struct {
		Result json.RawMessage `json:"result"`
	}
	var r api.ExecResult
	if err := json.Unmarshal(answer.body, &out); err != nil {
		return nil, fmt.Errorf("decode /v1/exec's answer: %w", err)
	}
	if err := json.Unmarshal(out.Result, &r); err != nil {
		return nil, fmt.Errorf("decode /v1/exec's result: %w", err)
	}
	res := answer.result(summary(string(r.Status), r.ExitCode, r.DurationMs, r.Stdout, r.Stderr, r.StdoutTruncated, r.StderrTruncated))
	res.StructuredContent = out.Result
	return res, nil
}

// summary is the text a model reads first: how the run ended, then its
// output.
func summary(status string, exit int, ms int64, stdout, stderr string, outCut, errCut bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status %s, exit code %d, %d ms\n", status, exit, ms)
	for _, s := range []struct {
		name, text string
		cut        bool
	}{{"stdout", stdout, outCut}, {"stderr", stderr, errCut}} {
		if s.text == "" {
			continue
		}
		fmt.Fprintf(&b, "--- %s", s.name)
		if s.cut {
			b.WriteString(" (truncated at the output limit)")
		}
		b.WriteString(" ---\n")
		b.WriteString(s.text)
		if !strings.HasSuffix(s.text, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// artifactList names the artifacts brought back and those missing.
func artifactList(out api.RunResponse) string {
	var b strings.Builder
	b.WriteString("artifacts (contents in the structured result):\n")
	for _, a := range out.Artifacts {
		fmt.Fprintf(&b, "  %s: %d bytes, sha256 %s\n", a.Path, a.Size, a.SHA256)
	}
	for _, m := range out.MissingArtifacts {
		fmt.Fprintf(&b, "  %s: missing (%s)\n", m.Path, m.Reason)
	}
	return b.String()
}

var pngMagic = []byte("\x89PNG\r\n\x1a\n")

// pngOf returns an artifact's bytes if they are a PNG image (by content,
// not by name), else nil.
func pngOf(a api.RunArtifact) []byte {
	if a.Encoding != "base64" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(a.Content)
	if err != nil || !bytes.HasPrefix(b, pngMagic) {
		return nil
	}
	return b
}
