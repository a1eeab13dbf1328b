package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"boxer/internal/mcpserver"
)

const mcpUsage = `usage: boxer mcp [--server URL] [serve's flags]

Speaks the Model Context Protocol on stdin and stdout, for desktop agents
that start boxer as a local tool: the tools run_python and exec. The log
goes to stderr.

By default boxer runs the sandboxes itself, as 'boxer serve' does (as root,
with the same flags and the same self-test), without listening anywhere.
With --server, it runs nothing: each tool call goes to the boxer service
at URL (its sandboxes, limits and prices), and this process needs no
privilege at all. --key (better: BOXER_API_KEY in the agent's env, out of
its arguments) is sent with each call, for a service that asks for keys.

An agent's configuration, for example:

  {"mcpServers": {"boxer": {"command": "boxer", "args": ["mcp"]}}}
`

func cmdMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ef := newEnvFlags("mcp", mcpUsage, stderr)
	cfg := serveFlags(ef)
	var server string
	ef.str(&server, "server", "BOXER_MCP_SERVER", "", "a boxer service's base URL to send tool calls to, instead of running sandboxes here")
	var key string
	ef.str(&key, "key", "BOXER_API_KEY", "", "with --server: the API key sent to it (Authorization: Bearer)")
	if !ef.parse(args) {
		return 2
	}
	log, err := jsonLogger(cfg.LogLevel, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "boxer mcp:", err)
		return 2
	}
	var srv *mcpserver.Server
	if server != "" {
		proxy, err := remoteAPI(server, key, log)
		if err != nil {
			fmt.Fprintln(stderr, "boxer mcp: --server:", err)
			return 2
		}
		// The remote may charge: its prices are unknown here.
		if srv, err = mcpserver.New(mcpserver.Config{API: proxy, Version: version, Logger: log, Priced: true}); err != nil {
			log.Error("boxer mcp", "err", err)
			return 1
		}
	} else {
		cfg.Addr = "" // nothing listens: stdio is the only way in
		m := &Main{cfg: cfg, log: log}
		defer m.Close()
		if err := m.Run(ctx); err != nil {
			log.Error("boxer mcp", "err", err)
			return 1
		}
		srv = m.mcp
	}
	t := &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout},
		MaxLineLength: int(cfg.API.MaxRunBodyBytes + 64<<10)} // a tool call carries at most a /v1/run-python body
	if err := srv.MCP().Run(ctx, t); err != nil && ctx.Err() == nil {
		log.Error("boxer mcp", "err", err)
		return 1
	}
	return 0
}

// remoteAPI is a proxy to the boxer API at base, sending key if there is
// one; its failures go to log.
func remoteAPI(base, key string, log *slog.Logger) (http.Handler, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http(s) URL", base)
	}
	return &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = u.Host
		if key != "" {
			r.Out.Header.Set("Authorization", "Bearer "+key)
		}
	}, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
