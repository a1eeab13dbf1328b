// Package mcpserver serves boxer's tools over the Model Context Protocol,
// for agents whose frameworks speak MCP rather than boxer's HTTP API:
// streamable HTTP at /mcp on boxer's own server, and stdio for desktop
// agents that start `boxer mcp` as a local tool.
//
// # Every tool call is an API call
//
// A tool call is turned into a request to boxer's HTTP API and made in
// process, through the same http.Handler the network reaches (or, with
// `boxer mcp --server URL`, through a proxy to a remote boxer):
//
//	tools/call run_python {code, files, ...}  ->  POST /v1/run-python
//	tools/call exec {code, language}          ->  POST /v1/exec
//
// So a tool call gets exactly what an HTTP caller gets: the same checks and
// stable error codes, the same admission and limits, job_id replay, the
// health figures, metrics and access log, and, with payments on, the same
// prices and the same guarantees against replayed or double-spent
// payments. Nothing here runs code or judges a request; it translates.
//
// # Results
//
// A run that happened is a successful tool call whatever the program did
// (a traceback, a timeout, an OOM kill): its structured content is the
// route's result object (api.RunResponse, api.ExecResult), and its text
// content is what a model reads first: the status line, stdout and
// stderr. PNG artifacts come back as image content as well. A request the
// API refused is a tool error whose text starts with the error's stable
// code ("invalid_request: ...").
package mcpserver
