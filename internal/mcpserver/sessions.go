package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"boxer"
	"boxer/internal/api"
)

// The session tools: /v1/sessions and below, for an agent that works in
// steps. The MCP transport is stateless, so the agent keeps the
// session_id; a call with an API key reaches only that key's sessions.

// SessionRef names a session.
type SessionRef struct {
	SessionID string `json:"session_id" jsonschema:"the id session_create returned"`
}

// SessionExecInput is session_exec's arguments.
type SessionExecInput struct {
	SessionID string `json:"session_id" jsonschema:"the id session_create returned"`
	api.SessionExecRequest
}

// SessionWriteInput is session_write_files' arguments.
type SessionWriteInput struct {
	SessionID string `json:"session_id" jsonschema:"the id session_create returned"`
	api.SessionFilesRequest
}

// SessionReadInput is session_read_file's arguments.
type SessionReadInput struct {
	SessionID string `json:"session_id" jsonschema:"the id session_create returned"`
	Path      string `json:"path" jsonschema:"the file's path relative to the work dir"`
}

// SessionFile is session_read_file's result.
type SessionFile struct {
	Path     string `json:"path"`
	Size     int    `json:"size"`
	Encoding string `json:"encoding" jsonschema:"utf-8: content is the text; base64: the bytes, encoded"`
	Content  string `json:"content"`
}

// NoInput is the arguments of a tool that takes none.
type NoInput struct{}

type sessionTool struct {
	tool    *mcp.Tool
	in, out any
	h       toolHandler
}

func (s *Server) sessionTools() []sessionTool {
	return []sessionTool{
		{&mcp.Tool{Name: "session_create", Title: "Start a Python session", Description: sessionCreateDescription}, api.SessionCreateRequest{}, api.SessionInfo{}, s.sessionCreate},
		{&mcp.Tool{Name: "session_exec", Title: "Run code in a session", Description: sessionExecDescription}, SessionExecInput{}, api.SessionExecResponse{}, s.sessionExec},
		{&mcp.Tool{Name: "session_fork", Title: "Fork a session", Description: sessionForkDescription}, SessionRef{}, api.SessionInfo{}, s.sessionFork},
		{&mcp.Tool{Name: "session_write_files", Title: "Write files into a session", Description: "Writes files into the session's work dir, replacing those there."}, SessionWriteInput{}, api.SessionFilesResponse{}, s.sessionWrite},
		{&mcp.Tool{Name: "session_read_file", Title: "Read a file from a session", Description: "Reads a file of the session's work dir: text as it is, other bytes in base64; a PNG is shown as an image too."}, SessionReadInput{}, SessionFile{}, s.sessionRead},
		{&mcp.Tool{Name: "session_list", Title: "List your sessions", Description: "Your live sessions, with when each expires."}, NoInput{}, api.SessionList{}, s.sessionList},
		{&mcp.Tool{Name: "session_delete", Title: "End a session", Description: "Ends the session at once; its state and files are gone."}, SessionRef{}, api.SessionDeleted{}, s.sessionDelete},
	}
}

// sessionPath is /v1/sessions/{id} and rest, the id escaped: whatever it
// holds stays one path segment.
func sessionPath(id, rest string) string {
	return "/v1/sessions/" + url.PathEscape(id) + rest
}

func (s *Server) sessionCreate(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error) {
	return newSession(s.callMethod(ctx, req, http.MethodPost, "/v1/sessions", args), "started")
}

func (s *Server) sessionFork(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error) {
	var in SessionRef
	if err := json.Unmarshal(args, &in); err != nil {
		return toolError(boxer.ECodeInvalidRequest, err.Error()), nil
	}
	return newSession(s.callMethod(ctx, req, http.MethodPost, sessionPath(in.SessionID, "/fork"), []byte("{}")), "forked from "+in.SessionID)
}

// newSession is the result of a call that made a session, how as said.
func newSession(a answer, how string) (*mcp.CallToolResult, error) {
	if a.status != http.StatusCreated {
		return a.failure(), nil
	}
	var info api.SessionInfo
	if err := json.Unmarshal(a.body, &info); err != nil {
		return nil, fmt.Errorf("decode the new session: %w", err)
	}
	res := a.result(fmt.Sprintf("session %s %s; it ends after %d s without a call, at the latest %s. Pass its session_id to session_exec.",
		info.SessionID, how, info.IdleTimeoutSeconds, info.CreatedAt.Add(secondsOf(info.MaxLifetimeSeconds)).Format("2006-01-02T15:04:05Z")))
	res.StructuredContent = json.RawMessage(a.body)
	return res, nil
}

func (s *Server) sessionExec(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error) {
	var in SessionExecInput
	if err := json.Unmarshal(args, &in); err != nil {
		return toolError(boxer.ECodeInvalidRequest, err.Error()), nil
	}
	body, err := json.Marshal(in.SessionExecRequest)
	if err != nil {
		return nil, err
	}
	a := s.callMethod(ctx, req, http.MethodPost, sessionPath(in.SessionID, "/exec"), body)
	if a.status != http.StatusOK {
		return a.failure(), nil
	}
	var out api.SessionExecResponse
	if err := json.Unmarshal(a.body, &out); err != nil {
		return nil, fmt.Errorf("decode the cell's answer: %w", err)
	}
	r := out.Result
	text := summary(string(r.Status), r.ExitCode, r.DurationMs, r.Stdout, r.Stderr, r.StdoutTruncated, r.StderrTruncated)
	if r.Value != nil {
		text += "--- value ---\n" + *r.Value + "\n"
	}
	if r.SessionEnded != nil {
		text += "the session ended: " + *r.SessionEnded + "\n"
	}
	res := a.result(text)
	for _, f := range r.Figures {
		if png, err := base64.StdEncoding.DecodeString(f.Data); err == nil {
			res.Content = append(res.Content, &mcp.ImageContent{Data: png, MIMEType: f.MimeType})
		}
	}
	res.StructuredContent = json.RawMessage(a.body)
	return res, nil
}

func (s *Server) sessionWrite(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error) {
	var in SessionWriteInput
	if err := json.Unmarshal(args, &in); err != nil {
		return toolError(boxer.ECodeInvalidRequest, err.Error()), nil
	}
	body, err := json.Marshal(in.SessionFilesRequest)
	if err != nil {
		return nil, err
	}
	a := s.callMethod(ctx, req, http.MethodPost, sessionPath(in.SessionID, "/files"), body)
	if a.status != http.StatusOK {
		return a.failure(), nil
	}
	var out api.SessionFilesResponse
	if err := json.Unmarshal(a.body, &out); err != nil {
		return nil, fmt.Errorf("decode the upload's answer: %w", err)
	}
	res := a.result("written: " + strings.Join(out.Written, ", "))
	res.StructuredContent = json.RawMessage(a.body)
	return res, nil
}

func (s *Server) sessionRead(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error) {
	var in SessionReadInput
	if err := json.Unmarshal(args, &in); err != nil {
		return toolError(boxer.ECodeInvalidRequest, err.Error()), nil
	}
	// The path is one segment, its slashes escaped: {path...} takes it
	// back whole, and no ".." walks the API's routes.
	a := s.callMethod(ctx, req, http.MethodGet, sessionPath(in.SessionID, "/files/"+url.PathEscape(in.Path)), nil)
	if a.status != http.StatusOK {
		return a.failure(), nil
	}
	out := SessionFile{Path: in.Path, Size: len(a.body), Encoding: "utf-8", Content: string(a.body)}
	if !utf8.Valid(a.body) {
		out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(a.body)
	}
	res := a.result(fmt.Sprintf("%s: %d bytes (%s)", in.Path, out.Size, out.Encoding))
	if strings.HasPrefix(string(a.body), string(pngMagic)) {
		res.Content = append(res.Content, &mcp.ImageContent{Data: a.body, MIMEType: "image/png"})
	} else if out.Encoding == "utf-8" {
		res.Content = append(res.Content, &mcp.TextContent{Text: out.Content})
	}
	res.StructuredContent = out
	return res, nil
}

func (s *Server) sessionList(ctx context.Context, req *mcp.CallToolRequest, _ json.RawMessage) (*mcp.CallToolResult, error) {
	a := s.callMethod(ctx, req, http.MethodGet, "/v1/sessions", nil)
	if a.status != http.StatusOK {
		return a.failure(), nil
	}
	var out api.SessionList
	if err := json.Unmarshal(a.body, &out); err != nil {
		return nil, fmt.Errorf("decode the sessions: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d sessions\n", len(out.Sessions))
	for _, i := range out.Sessions {
		fmt.Fprintf(&b, "  %s: %d cells, expires %s\n", i.SessionID, i.Execs, i.ExpiresAt.Format("2006-01-02T15:04:05Z"))
	}
	res := a.result(b.String())
	res.StructuredContent = json.RawMessage(a.body)
	return res, nil
}

func (s *Server) sessionDelete(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error) {
	var in SessionRef
	if err := json.Unmarshal(args, &in); err != nil {
		return toolError(boxer.ECodeInvalidRequest, err.Error()), nil
	}
	a := s.callMethod(ctx, req, http.MethodDelete, sessionPath(in.SessionID, ""), nil)
	if a.status != http.StatusOK {
		return a.failure(), nil
	}
	res := a.result("session " + in.SessionID + " ended")
	res.StructuredContent = json.RawMessage(a.body)
	return res, nil
}

const sessionCreateDescription = `Starts a Python session: one interpreter in a sandbox of its own (no network) ` +
	`that keeps its variables, imports, open files and work dir between session_exec calls, as a notebook kernel does. ` +
	`Optional files to start with, memory_mb and cpus for the whole session, idle_timeout_seconds (default 600) ` +
	`and max_lifetime_seconds (default 3600). Returns the session_id to pass to the other session tools.`

const sessionExecDescription = `Runs code in a session's interpreter: what earlier calls defined is there. ` +
	`Returns stdout, stderr, status, the value of a trailing expression, and matplotlib figures left open as images. ` +
	`A cell past timeout_seconds is interrupted and the session goes on; sessionAlive says whether it survived.`

const sessionForkDescription = `Starts a new session holding a copy of this one as it is now (variables, imports, ` +
	`open files, work dir), in milliseconds: try something risky in the fork and keep the original, or branch one loaded ` +
	`data set into several experiments. The two then diverge. A session with a thread or process of its own still ` +
	`running cannot be forked (fork_refused); it goes on unharmed.`

func secondsOf(n int64) time.Duration { return time.Duration(n) * time.Second }
