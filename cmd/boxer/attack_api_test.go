package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
)

// runBody is a /v1/run-python body with main.py (after the prelude) and
// more members. On the warm path it keeps the default command, which the
// pool runs warm; on the cold path an interpreter flag sends it cold.
func runBody(path string, files map[string]string, extra string) string {
	f, _ := json.Marshal(files)
	body := `{"files": ` + string(f) + `, ` + coldLimits
	if path == "cold" {
		body += `, "command": ["python", "-u", "main.py"]`
	}
	if extra != "" {
		body += ", " + extra
	}
	return body + "}"
}

// artifactProbe is a program that leaves files behind and the artifact
// paths the request asks for: each path is returned (as "encoding:content")
// or refused with an exact reason.
type artifactProbe struct {
	name    string
	code    string
	paths   []string
	stdout  string
	arts    map[string]string
	missing map[string]string
}

const symlinkRefused = "refused: path goes through a symlink"

var artifactProbes = []artifactProbe{
	{name: "art/symlink-to-shadow", code: `os.symlink("/etc/shadow", "s")`, paths: []string{"s"}, missing: map[string]string{"s": symlinkRefused}},
	{name: "art/symlink-to-proc-1-environ", code: `os.symlink("/proc/1/environ", "e")`, paths: []string{"e"}, missing: map[string]string{"e": symlinkRefused}},
	{name: "art/symlink-to-state-dir", code: `os.symlink("{{STATE}}/lock", "l")`, paths: []string{"l"}, missing: map[string]string{"l": symlinkRefused}},
	{name: "art/symlinked-parent-dir", code: `os.symlink("/etc", "etc")`, paths: []string{"etc/passwd"}, missing: map[string]string{"etc/passwd": symlinkRefused}},
	{name: "art/fifo", code: `os.mkfifo("fifo")`, paths: []string{"fifo"}, missing: map[string]string{"fifo": "refused: is a FIFO"}},
	{name: "art/socket", code: `s = socket.socket(socket.AF_UNIX); s.bind("sock")`, paths: []string{"sock"}, missing: map[string]string{"sock": "refused: is a socket"}},
	// No device node can be made or linked in; a symlink to one is
	// refused like any symlink.
	{name: "art/device", code: pr(`do(lambda: os.mknod("null", 0o666 | 0o020000, os.makedev(1, 3)))`, `do(lambda: os.link("/dev/zero", "z"))`, `do(lambda: os.symlink("/dev/zero", "zero"))`),
		paths: []string{"null", "z", "zero"}, stdout: "EPERM EXDEV ok\n",
		missing: map[string]string{"null": "not found", "z": "not found", "zero": symlinkRefused}},
	{name: "art/directory", code: `os.mkdir("d")`, paths: []string{"d"}, missing: map[string]string{"d": "refused: is a directory"}},
	{name: "art/huge-file", code: `open("big", "wb").write(b"x" * (17 << 20))`, paths: []string{"big"},
		missing: map[string]string{"big": "refused: larger than the artifact limit (16777216 bytes)"}},
	// 16 artifacts (the most a request may name) among 2000 files.
	{name: "art/many-files", code: `for i in range(2000): open("f%d" % i, "w").write("n%d" % i)`,
		paths: func() []string {
			var p []string
			for i := range 16 {
				p = append(p, fmt.Sprintf("f%d", i*100))
			}
			return p
		}(),
		arts: func() map[string]string {
			m := map[string]string{}
			for i := range 16 {
				m[fmt.Sprintf("f%d", i*100)] = fmt.Sprintf("utf-8:n%d", i*100)
			}
			return m
		}()},
	// NUL bytes are valid UTF-8, and six bytes each as JSON text: a file
	// of them comes back as base64, a third more than its size.
	{name: "art/nul-file", code: `open("z", "wb").write(bytes(64 << 10))`, paths: []string{"z"},
		arts: map[string]string{"z": "base64:" + base64.StdEncoding.EncodeToString(make([]byte, 64<<10))}},
	{name: "art/binary", code: `open("bin", "wb").write(bytes(range(256)))`, paths: []string{"bin", "missing"},
		arts:    map[string]string{"bin": "base64:" + base64.StdEncoding.EncodeToString(allBytes())},
		missing: map[string]string{"missing": "not found"}},
}

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func runArtifactProbes(t *testing.T, a *attacker, host *hostWatch, vars map[string]string) {
	for _, p := range artifactProbes {
		probe(t, a, host, p.name, false, func(t *testing.T, path string) {
			ap, _ := json.Marshal(p.paths)
			body := runBody(path, map[string]string{"main.py": attackPrelude + fill(p.code, vars)}, `"artifact_paths": `+string(ap))
			r := a.send(t, "/v1/run-python", "", []byte(body))
			expect(t, r, ok(p.stdout))
			if !maps.Equal(r.artifacts, orEmpty(p.arts)) {
				t.Errorf("artifacts %.300q, want %.300q", r.artifacts, p.arts)
			}
			if !maps.Equal(r.missing, orEmpty(p.missing)) {
				t.Errorf("missing artifacts %q, want %q", r.missing, p.missing)
			}
		})
	}
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// apiSide is one request as sent and its exact answer: an error, or (code
// 200) a run's outcome.
type apiSide struct {
	route, ctype, body string
	code               int
	errCode, msg       string
	run                *outcome
}

// apiProbe is a hostile request. The warm side goes to /v1/exec, the cold
// side to /v1/run-python; where only /v1/run-python has the field under
// attack, both go there (warm: the default command; cold: an interpreter
// flag).
type apiProbe struct {
	name       string
	warm, cold apiSide
}

func toExec(body string, code int, errCode, msg string) apiSide {
	return apiSide{route: "/v1/exec", body: body, code: code, errCode: errCode, msg: msg}
}

func toRun(body string, code int, errCode, msg string) apiSide {
	return apiSide{route: "/v1/run-python", body: body, code: code, errCode: errCode, msg: msg}
}

func ranRun(body string, o outcome) apiSide {
	return apiSide{route: "/v1/run-python", body: body, code: 200, run: &o}
}

func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

func manyFiles(n int) map[string]string {
	m := map[string]string{"main.py": "import os; print(len(os.listdir('.')))"}
	for i := 1; i < n; i++ {
		m[fmt.Sprintf("f%02d.py", i)] = ""
	}
	return m
}

// unicodeNames are file names that look like others: right-to-left
// override, fullwidth letters, composed and decomposed é, a zero-width
// space. Each is a distinct, valid name and is written as sent.
var unicodeNames = map[string]string{
	"main.py":      "import os; print(sorted(ascii(n) for n in os.listdir('.')))",
	"\u202egnp.py": "", "\uff4d\uff41in.py": "", "e\u0301.txt": "", "\u00e9.txt": "", "a\u200b.py": "",
}

const unicodeListing = `["'\\u202egnp.py'", "'\\uff4d\\uff41in.py'", "'\\xe9.txt'", "'a\\u200b.py'", "'e\\u0301.txt'", "'main.py'"]` + "\n"

func apiProbes(vars map[string]string) []apiProbe {
	const tooLarge, bad = 413, 400
	big := strings.Repeat("x", 9<<20)
	bin := vars["BIN"]
	return []apiProbe{
		{"api/oversized-code",
			toExec(execBody("#"+strings.Repeat("x", 65536)), tooLarge, "code_too_large", "code is 65537 bytes; at most 65536 bytes are allowed"),
			toRun(runBody("cold", map[string]string{"main.py": big}, ""), tooLarge, "payload_too_large", "the request body is larger than 8388608 bytes")},
		{"api/oversized-body",
			toExec(`{"code": "1"`+strings.Repeat(" ", 600<<10)+`}`, tooLarge, "payload_too_large", "the request body is larger than 524288 bytes"),
			toRun(runBody("cold", map[string]string{"main.py": "1"}, `"stdin": "`+big+`"`), tooLarge, "payload_too_large", "the request body is larger than 8388608 bytes")},
		{"api/bad-json",
			toExec(`{"code": `, bad, "invalid_json", "invalid JSON at byte 9: unexpected end of input, expected a value"),
			toRun(`{"files": {"main.py": "print(1)"`, bad, "invalid_json", "invalid JSON at byte 32: unexpected end of input inside an object")},
		{"api/wrong-types",
			toExec(`{"code": ["print(1)"]}`, bad, "invalid_request", "code: must be a string, got an array"),
			toRun(`{"files": {"main.py": "1"}, "timeout_seconds": "3"}`, bad, "invalid_request", "timeout_seconds: must be an integer from 1 to 30, got a string")},
		{"api/deep-nesting",
			toExec(`{"code": `+nested(10000)+`}`, bad, "invalid_json", "invalid JSON at byte 40: nested deeper than 32 levels"),
			toRun(`{"files": {"main.py": "1"}, "stdin": `+nested(100000)+`}`, bad, "invalid_json", "invalid JSON at byte 68: nested deeper than 32 levels")},
		{"api/nul-byte-escaped",
			toExec(`{"code": "print(1)\u0000import os"}`, bad, "invalid_request", "code: contains a NUL byte at byte 8 of the value; NUL is not allowed"),
			toRun(`{"files": {"main.py": "1\u0000"}}`, bad, "invalid_request", `files["main.py"]: contains a NUL byte at byte 1 of the value; NUL is not allowed`)},
		{"api/nul-byte-raw",
			toExec("{\"code\": \"print(1)\x00\"}", bad, "invalid_json", "invalid JSON at byte 18: control character U+0000 in a string must be escaped"),
			toRun("{\"files\": {\"main.py\x00\": \"1\"}}", bad, "invalid_json", "invalid JSON at byte 19: control character U+0000 in a string must be escaped")},
		{"api/invalid-utf8",
			toExec("{\"code\": \"print('\xff')\"}", bad, "invalid_request", "code: must be valid UTF-8 text: invalid UTF-8 byte 0xFF at byte 17"),
			toRun("{\"files\": {\"ma\xffin.py\": \"1\"}}", bad, "invalid_request", `files: path "ma\xffin.py" must be valid UTF-8 text: invalid UTF-8 byte 0xFF at byte 14`)},
		{"api/lone-surrogate",
			toExec(`{"code": "print('\ud800')"}`, bad, "invalid_request", `code: must be valid UTF-8 text: lone UTF-16 surrogate \uD800 at byte 17`),
			toRun(`{"files": {"main.py": "1"}, "stdin": "\udfff"}`, bad, "invalid_request", `stdin: must be valid UTF-8 text: lone UTF-16 surrogate \uDFFF at byte 38`)},
		{"api/path-tricks",
			toRun(`{"files": {"./main.py": "1", "main.py": "2"}}`, bad, "invalid_request", `files: paths "./main.py" and "main.py" name the same file "main.py"`),
			toRun(`{"files": {"..\\main.py": "1"}}`, bad, "invalid_request", `files: path "..\\main.py" contains '\'; use '/' to separate directories`)},
		{"api/dotdot-file",
			toRun(`{"files": {"../x.py": "1", "main.py": "1"}}`, bad, "invalid_request", `files: path "../x.py" contains a '..' component; paths must stay inside the work dir`),
			toRun(`{"files": {"/etc/cron.d/x": "1", "main.py": "1"}}`, bad, "invalid_request", `files: path "/etc/cron.d/x" is absolute; paths are relative to the work dir`)},
		{"api/unicode-file-names",
			ranRun(runBody("warm", unicodeNames, ""), ok(unicodeListing)),
			ranRun(runBody("cold", unicodeNames, ""), ok(unicodeListing))},
		{"api/64-files",
			ranRun(runBody("warm", manyFiles(64), ""), ok("64\n")),
			ranRun(runBody("cold", manyFiles(64), ""), ok("64\n"))},
		{"api/65-files",
			toRun(runBody("warm", manyFiles(65), ""), bad, "invalid_request", "files: has 65 entries; allowed: 1 to 64"),
			toRun(runBody("cold", manyFiles(65), ""), bad, "invalid_request", "files: has 65 entries; allowed: 1 to 64")},
		{"api/huge-stdin",
			ranRun(runBody("warm", map[string]string{"main.py": "import sys; print(len(sys.stdin.buffer.read()))"}, `"stdin": "`+strings.Repeat("s", 7<<20)+`"`), ok("7340032\n")),
			ranRun(runBody("cold", map[string]string{"main.py": "import sys; print(len(sys.stdin.buffer.read()))"}, `"stdin": "`+strings.Repeat("s", 7<<20)+`"`), ok("7340032\n"))},
		{"api/strict-fields",
			toExec(`{"code": "1", "Code": "2"}`, bad, "invalid_request", `unknown field "Code" (field names are case-sensitive: did you mean "code"?); allowed fields: code, language`),
			toRun(`{"files": {"main.py": "1"}, "stdin": "a", "stdin": "b"}`, bad, "invalid_json", `invalid JSON at byte 42: duplicate object key "stdin" (first at byte 28); keys must be unique`)},
		{"api/content-type",
			apiSide{route: "/v1/exec", ctype: "text/plain", body: `{"code": "1"}`, code: 415, errCode: "unsupported_media_type", msg: `Content-Type "text/plain" is not supported; send application/json`},
			apiSide{route: "/v1/run-python", ctype: "application/json; charset=latin1", body: `{"files": {"main.py": "1"}}`, code: 415, errCode: "unsupported_media_type", msg: `charset "latin1" is not supported; JSON must be UTF-8`}},
		// A command that names a host program: nothing of the host is
		// there to run (a command other than python always runs cold).
		{"api/command-host-program",
			ranRun(`{"files": {"main.py": "1"}, "command": ["/bin/sh", "-c", "id"]}`, outcome{status: "nonzero_exit", exit: 127, stderr: "boxer: cannot run \"/bin/sh\": no such file or directory\n"}),
			ranRun(`{"files": {"main.py": "1"}, "command": ["`+bin+`", "serve"]}`, outcome{status: "nonzero_exit", exit: 127, stderr: "boxer: cannot run \"" + bin + "\": no such file or directory\n"})},
		// A command the API takes runs, however its encoding escapes it:
		// JSON makes each '<' six bytes, and the warm path's job message
		// once carried the code twice.
		{"api/command-of-escapes",
			ranRun(`{"files": {"main.py": "1"}, "command": ["python", "-c", "#`+strings.Repeat("<", 60000)+`\nprint(1)"]}`, ok("1\n")),
			ranRun(`{"files": {"main.py": "1"}, "command": ["python", "-u", "-c", "#`+strings.Repeat("<", 60000)+`\nprint(1)"]}`, ok("1\n"))},
		{"art/dotdot-path",
			toRun(runBody("warm", map[string]string{"main.py": "1"}, `"artifact_paths": ["../../etc/shadow"]`), bad, "invalid_request", `artifact_paths[0]: path "../../etc/shadow" contains a '..' component; paths must stay inside the work dir`),
			toRun(runBody("cold", map[string]string{"main.py": "1"}, `"artifact_paths": ["out/../../x"]`), bad, "invalid_request", `artifact_paths[0]: path "out/../../x" contains a '..' component; paths must stay inside the work dir`)},
		{"art/absolute-path",
			toRun(runBody("warm", map[string]string{"main.py": "1"}, `"artifact_paths": ["/etc/shadow"]`), bad, "invalid_request", `artifact_paths[0]: path "/etc/shadow" is absolute; paths are relative to the work dir`),
			toRun(runBody("cold", map[string]string{"main.py": "1"}, `"artifact_paths": ["/proc/1/environ"]`), bad, "invalid_request", `artifact_paths[0]: path "/proc/1/environ" is absolute; paths are relative to the work dir`)},
		{"art/too-many-paths",
			toRun(runBody("warm", map[string]string{"main.py": "1"}, `"artifact_paths": `+jsonList(17)), bad, "invalid_request", "artifact_paths: has 17 elements; at most 16 are allowed"),
			toRun(runBody("cold", map[string]string{"main.py": "1"}, `"artifact_paths": `+jsonList(17)), bad, "invalid_request", "artifact_paths: has 17 elements; at most 16 are allowed")},
	}
}

func jsonList(n int) string {
	var p []string
	for i := range n {
		p = append(p, fmt.Sprintf("a%d", i))
	}
	b, _ := json.Marshal(p)
	return string(b)
}

func runAPIProbes(t *testing.T, a *attacker, host *hostWatch, vars map[string]string) {
	for _, p := range apiProbes(vars) {
		probe(t, a, host, p.name, false, func(t *testing.T, path string) {
			side := p.warm
			if path == "cold" {
				side = p.cold
			}
			r := a.sendRaw(t, side.route, side.ctype, []byte(side.body))
			if side.run != nil {
				expect(t, r, *side.run)
			} else if r.code != side.code || r.errCode != side.errCode || r.errMsg != side.msg {
				t.Errorf("got  %d %s %q\nwant %d %s %q", r.code, r.errCode, r.errMsg, side.code, side.errCode, side.msg)
			}
		})
	}
	// DNS rebinding: a page whose name points at 127.0.0.1 reaches boxer
	// over loopback with its own name in Host. Nothing runs.
	probe(t, a, host, "api/dns-rebinding", false, func(t *testing.T, path string) {
		for _, route := range []string{"/v1/exec", "/v1/run-python", "/mcp"} {
			r := a.sendRawAs(t, "rebind.attacker.example:8080", route, "", []byte(`{"code":"print(1)"}`))
			if r.code != 403 || r.errCode != "forbidden_host" {
				t.Errorf("%s with a foreign Host over loopback: %d %s %q, want 403 forbidden_host", route, r.code, r.errCode, r.errMsg)
			}
		}
	})
}
