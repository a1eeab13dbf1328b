package api

import (
	"strings"
	"testing"

	"boxer"
)

type decodeCase struct {
	name string
	body string
	code string // "" for accepted
	msg  string // substring of the message
}

func TestDecodeExec(t *testing.T) {
	tests := []decodeCase{
		{"minimal", `{"code":"print(1)"}`, "", ""},
		{"language python", `{"code":"print(1)","language":"python"}`, "", ""},
		{"language python3", `{"code":"x","language":"python3"}`, "", ""},
		{"white space around", " \n\t{\"code\":\"x\"}\r\n ", "", ""},
		{"empty code", `{"code":""}`, "", ""},
		{"escapes", `{"code":"print(\"\\u00e9\\ud83d\\ude00\")\n"}`, "", ""},

		{"missing code", `{}`, boxer.ECodeInvalidRequest, "code: is required"},
		{"null code", `{"code":null}`, boxer.ECodeInvalidRequest, "code: must be a string, got null"},
		{"number code", `{"code":42}`, boxer.ECodeInvalidRequest, "code: must be a string, got a number"},
		{"array code", `{"code":["x"]}`, boxer.ECodeInvalidRequest, "code: must be a string, got an array"},
		{"null language", `{"code":"x","language":null}`, boxer.ECodeInvalidRequest, "language: must be a string, got null"},
		{"bool language", `{"code":"x","language":true}`, boxer.ECodeInvalidRequest, "language: must be a string, got a boolean"},
		{"other language", `{"code":"x","language":"ruby"}`, boxer.ECodeUnsupportedLanguage, `"ruby" is not supported; supported: "python"`},
		{"language case", `{"code":"x","language":"Python"}`, boxer.ECodeUnsupportedLanguage, `"Python"`},
		{"duplicate key", `{"code":"a","code":"b"}`, boxer.ECodeInvalidJSON, `duplicate object key "code"`},
		{"duplicate via escape", `{"code":"a","c\u006fde":"b"}`, boxer.ECodeInvalidJSON, `duplicate object key "code"`},
		{"case variant", `{"Code":"x"}`, boxer.ECodeInvalidRequest, `unknown field "Code" (field names are case-sensitive: did you mean "code"?)`},
		{"case variant beside", `{"code":"x","CODE":"y"}`, boxer.ECodeInvalidRequest, `unknown field "CODE"`},
		{"unknown field", `{"code":"x","timeout":5}`, boxer.ECodeInvalidRequest, `unknown field "timeout"; allowed fields: code, language`},
		{"unknown fields", `{"code":"x","a":1,"b":2}`, boxer.ECodeInvalidRequest, `unknown fields "a", "b"`},
		{"trailing object", `{"code":"x"} {}`, boxer.ECodeInvalidJSON, "unexpected data after the top-level value"},
		{"trailing garbage", `{"code":"x"}x`, boxer.ECodeInvalidJSON, "after the top-level value"},
		{"trailing comma", `{"code":"x",}`, boxer.ECodeInvalidJSON, "expected a string naming an object member"},
		{"single quotes", `{'code':'x'}`, boxer.ECodeInvalidJSON, "invalid JSON at byte 1"},
		{"byte order mark", "\uFEFF{\"code\":\"x\"}", boxer.ECodeInvalidJSON, "byte 0xEF"},
		{"NUL escape", `{"code":"a\u0000b"}`, boxer.ECodeInvalidRequest, "code: contains a NUL byte at byte 1"},
		{"raw NUL", "{\"code\":\"a\x00b\"}", boxer.ECodeInvalidJSON, "control character U+0000"},
		{"raw control", "{\"code\":\"a\tb\"}", boxer.ECodeInvalidJSON, "control character U+0009"},
		{"invalid UTF-8", "{\"code\":\"a\xffb\"}", boxer.ECodeInvalidRequest, "code: must be valid UTF-8 text: invalid UTF-8 byte 0xFF"},
		{"overlong UTF-8", "{\"code\":\"\xc0\xaf\"}", boxer.ECodeInvalidRequest, "code: must be valid UTF-8"},
		{"UTF-8 surrogate", "{\"code\":\"\xed\xa0\x80\"}", boxer.ECodeInvalidRequest, "code: must be valid UTF-8"},
		{"lone high surrogate", `{"code":"\ud800"}`, boxer.ECodeInvalidRequest, `lone UTF-16 surrogate \uD800`},
		{"lone low surrogate", `{"code":"\udc00x"}`, boxer.ECodeInvalidRequest, `lone UTF-16 surrogate \uDC00`},
		{"reversed pair", `{"code":"\udc00\ud800"}`, boxer.ECodeInvalidRequest, "lone UTF-16 surrogate"},
		{"invalid UTF-8 outside strings", "{\"code\":\"x\"\xff}", boxer.ECodeInvalidJSON, "byte 0xFF"},
		{"array body", `[]`, boxer.ECodeInvalidRequest, "must be a JSON object, got an array"},
		{"string body", `"code"`, boxer.ECodeInvalidRequest, "got a string"},
		{"null body", `null`, boxer.ECodeInvalidRequest, "got null"},
		{"bad escape", `{"code":"\x"}`, boxer.ECodeInvalidJSON, `invalid escape \x`},
		{"leading zero", `{"code":"x","language":01}`, boxer.ECodeInvalidJSON, "expected ',' or '}' in an object"},
		{"deep nesting", `{"code":"x","a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, boxer.ECodeInvalidJSON, "nested deeper than 32"},
		{"code 64 KiB", `{"code":"` + strings.Repeat("a", 65536) + `"}`, "", ""},
		{"code 64 KiB + 1", `{"code":"` + strings.Repeat("a", 65537) + `"}`, boxer.ECodeCodeTooLarge, "code is 65537 bytes; at most 65536 bytes are allowed"},
		{"code limit in bytes", `{"code":"` + strings.Repeat("é", 32769) + `"}`, boxer.ECodeCodeTooLarge, "code is 65538 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, e := decodeExec([]byte(tt.body), DefaultMaxCodeBytes)
			checkDecode(t, tt, e)
		})
	}
}

func checkDecode(t *testing.T, tt decodeCase, e *boxer.Error) {
	t.Helper()
	switch {
	case tt.code == "" && e != nil:
		t.Fatalf("rejected: %v", e)
	case tt.code == "":
	case e == nil:
		t.Fatalf("accepted, want %s", tt.code)
	case e.Code != tt.code || !strings.Contains(e.Message, tt.msg):
		t.Fatalf("error = %s: %s\nwant %s with %q", e.Code, e.Message, tt.code, tt.msg)
	}
}

func TestDecodeRunPython(t *testing.T) {
	files := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"f` + strings.Repeat("x", i) + `.py":""`)
		}
		return `{"files":{` + b.String() + `}}`
	}
	arts := func(n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = `"a` + strings.Repeat("x", i) + `"`
		}
		return `{"files":{"main.py":""},"artifact_paths":[` + strings.Join(s, ",") + `]}`
	}
	main := `"files":{"main.py":"print(1)"}`
	tests := []decodeCase{
		{"minimal", `{` + main + `}`, "", ""},
		{"everything", `{"files":{"main.py":"x","lib/u.py":"y"},"stdin":"in","job_id":"j-1","command":["python","-m","pytest","t.py"],` +
			`"runtime":"python","cpus":1.5,"memory_mb":256,"timeout_seconds":10,"artifact_paths":["output/chart.png"]}`, "", ""},
		{"64 files", files(64), "", ""},
		{"16 artifacts", arts(16), "", ""},
		{"integer written as 512.0", `{` + main + `,"memory_mb":512.0}`, "", ""},
		{"integer in exponent form", `{` + main + `,"timeout_seconds":1e1}`, "", ""},
		{"bounds", `{` + main + `,"cpus":0.1,"memory_mb":64,"timeout_seconds":1}`, "", ""},
		{"upper bounds", `{` + main + `,"cpus":2,"memory_mb":1024,"timeout_seconds":30}`, "", ""},

		{"no files", `{}`, boxer.ECodeInvalidRequest, "files: is required"},
		{"null files", `{"files":null}`, boxer.ECodeInvalidRequest, "files: must be an object"},
		{"files array", `{"files":["main.py"]}`, boxer.ECodeInvalidRequest, "files: must be an object"},
		{"zero files", `{"files":{}}`, boxer.ECodeInvalidRequest, "files: has 0 entries; allowed: 1 to 64"},
		{"65 files", files(65), boxer.ECodeInvalidRequest, "files: has 65 entries; allowed: 1 to 64"},
		{"content not a string", `{"files":{"main.py":1}}`, boxer.ECodeInvalidRequest, `files["main.py"]: must be a string, got a number`},
		{"content null", `{"files":{"main.py":null}}`, boxer.ECodeInvalidRequest, `files["main.py"]: must be a string, got null`},
		{"content NUL", `{"files":{"main.py":"a\u0000"}}`, boxer.ECodeInvalidRequest, `files["main.py"]: contains a NUL byte`},
		{"content invalid UTF-8", "{\"files\":{\"main.py\":\"\xfe\"}}", boxer.ECodeInvalidRequest, `files["main.py"]: must be valid UTF-8`},
		{"absolute path", `{"files":{"/etc/passwd":"x"}}`, boxer.ECodeInvalidRequest, `files: path "/etc/passwd" is absolute`},
		{"dot-dot", `{"files":{"a/../../x":"x"}}`, boxer.ECodeInvalidRequest, `contains a '..' component`},
		{"dot-dot alone", `{"files":{"..":"x"}}`, boxer.ECodeInvalidRequest, `'..'`},
		{"empty path", `{"files":{"":"x"}}`, boxer.ECodeInvalidRequest, `files: path "" is empty`},
		{"NUL path", `{"files":{"a\u0000b":"x"}}`, boxer.ECodeInvalidRequest, `contains a NUL byte`},
		{"control path", `{"files":{"a\nb":"x"}}`, boxer.ECodeInvalidRequest, `control character U+000A`},
		{"backslash path", `{"files":{"a\\b.py":"x"}}`, boxer.ECodeInvalidRequest, `contains '\'`},
		{"directory path", `{"files":{"lib/":"x"}}`, boxer.ECodeInvalidRequest, `ends with '/'`},
		{"dot path", `{"files":{".":"x"}}`, boxer.ECodeInvalidRequest, `names the work dir itself`},
		{"long path", `{"files":{"` + strings.Repeat("a/", 257) + `b":"x"}}`, boxer.ECodeInvalidRequest, `bytes long; at most 512`},
		{"long component", `{"files":{"` + strings.Repeat("a", 256) + `":"x"}}`, boxer.ECodeInvalidRequest, `component of 256 bytes`},
		{"same file after cleaning", `{"files":{"./main.py":"a","main.py":"b"}}`, boxer.ECodeInvalidRequest, `paths "./main.py" and "main.py" name the same file "main.py"`},
		{"double slash duplicate", `{"files":{"a//b.py":"a","a/b.py":"b"}}`, boxer.ECodeInvalidRequest, `name the same file`},
		{"duplicate key", `{"files":{"main.py":"a","main.py":"b"}}`, boxer.ECodeInvalidJSON, `duplicate object key "main.py"`},
		{"file is a directory", `{"files":{"a":"x","a/b.py":"y"}}`, boxer.ECodeInvalidRequest, `path "a/b.py" needs "a" to be a directory, but "a" is a file`},

		{"stdin null", `{` + main + `,"stdin":null}`, boxer.ECodeInvalidRequest, "stdin: must be a string, got null"},
		{"stdin NUL", `{` + main + `,"stdin":"\u0000"}`, boxer.ECodeInvalidRequest, "stdin: contains a NUL byte"},
		{"stdin invalid UTF-8", "{" + main + ",\"stdin\":\"\xff\"}", boxer.ECodeInvalidRequest, "stdin: must be valid UTF-8"},
		{"job_id empty", `{` + main + `,"job_id":""}`, boxer.ECodeInvalidRequest, "job_id: must be 1 to 128 characters"},
		{"job_id long", `{` + main + `,"job_id":"` + strings.Repeat("j", 129) + `"}`, boxer.ECodeInvalidRequest, "job_id: must be 1 to 128 characters, got 129"},
		{"job_id space", `{` + main + `,"job_id":"a b"}`, boxer.ECodeInvalidRequest, "job_id: has ' ' at position 1"},
		{"job_id slash", `{` + main + `,"job_id":"a/b"}`, boxer.ECodeInvalidRequest, "job_id: has '/'"},
		{"job_id number", `{` + main + `,"job_id":7}`, boxer.ECodeInvalidRequest, "job_id: must be a string, got a number"},
		{"command empty", `{` + main + `,"command":[]}`, boxer.ECodeInvalidRequest, "command: must not be empty"},
		{"command empty program", `{` + main + `,"command":["","x"]}`, boxer.ECodeInvalidRequest, "command[0]: must name a program"},
		{"command element type", `{` + main + `,"command":["python",1]}`, boxer.ECodeInvalidRequest, "command[1]: must be a string, got a number"},
		{"command string", `{` + main + `,"command":"python main.py"}`, boxer.ECodeInvalidRequest, "command: must be an array of strings, got a string"},
		{"command NUL", `{` + main + `,"command":["python","a\u0000"]}`, boxer.ECodeInvalidRequest, "command[1]: contains a NUL byte"},
		{"runtime other", `{` + main + `,"runtime":"node"}`, boxer.ECodeInvalidRequest, `runtime: "node" is not supported; allowed: "python"`},
		{"cpus low", `{` + main + `,"cpus":0.05}`, boxer.ECodeInvalidRequest, "cpus: 0.05 is out of range; allowed: 0.1 to 2"},
		{"cpus high", `{` + main + `,"cpus":2.5}`, boxer.ECodeInvalidRequest, "cpus: 2.5 is out of range; allowed: 0.1 to 2"},
		{"cpus string", `{` + main + `,"cpus":"1"}`, boxer.ECodeInvalidRequest, "cpus: must be a number from 0.1 to 2, got a string"},
		{"cpus huge", `{` + main + `,"cpus":1e999}`, boxer.ECodeInvalidRequest, "cpus: 1e999 is out of range"},
		{"memory low", `{` + main + `,"memory_mb":63}`, boxer.ECodeInvalidRequest, "memory_mb: 63 is out of range; allowed: 64 to 1024"},
		{"memory high", `{` + main + `,"memory_mb":1025}`, boxer.ECodeInvalidRequest, "memory_mb: 1025 is out of range; allowed: 64 to 1024"},
		{"memory fraction", `{` + main + `,"memory_mb":512.5}`, boxer.ECodeInvalidRequest, "memory_mb: must be an integer from 64 to 1024, got 512.5"},
		{"memory null", `{` + main + `,"memory_mb":null}`, boxer.ECodeInvalidRequest, "memory_mb: must be an integer from 64 to 1024, got null"},
		{"timeout zero", `{` + main + `,"timeout_seconds":0}`, boxer.ECodeInvalidRequest, "timeout_seconds: 0 is out of range; allowed: 1 to 30"},
		{"timeout high", `{` + main + `,"timeout_seconds":31}`, boxer.ECodeInvalidRequest, "timeout_seconds: 31 is out of range; allowed: 1 to 30"},
		{"timeout negative", `{` + main + `,"timeout_seconds":-5}`, boxer.ECodeInvalidRequest, "out of range"},
		{"17 artifacts", arts(17), boxer.ECodeInvalidRequest, "artifact_paths: has 17 elements; at most 16 are allowed"},
		{"artifact absolute", `{` + main + `,"artifact_paths":["/etc/shadow"]}`, boxer.ECodeInvalidRequest, `artifact_paths[0]: path "/etc/shadow" is absolute`},
		{"artifact dot-dot", `{` + main + `,"artifact_paths":["ok","../x"]}`, boxer.ECodeInvalidRequest, `artifact_paths[1]: path "../x" contains a '..' component`},
		{"artifact duplicate", `{` + main + `,"artifact_paths":["out/a","./out/a"]}`, boxer.ECodeInvalidRequest, `artifact_paths[1]: path "./out/a" names the same file as artifact_paths[0]`},
		{"unknown field", `{` + main + `,"env":{}}`, boxer.ECodeInvalidRequest, `unknown field "env"`},
		{"case variant", `{` + main + `,"Job_ID":"x"}`, boxer.ECodeInvalidRequest, `did you mean "job_id"?`},
		{"camelCase", `{` + main + `,"timeoutSeconds":5}`, boxer.ECodeInvalidRequest, `unknown field "timeoutSeconds"`},
		{"trailing data", `{` + main + `}]`, boxer.ECodeInvalidJSON, "after the top-level value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, e := decodeRunPython([]byte(tt.body))
			checkDecode(t, tt, e)
		})
	}
}

func TestRunRequestHash(t *testing.T) {
	hashOf := func(body string) string {
		t.Helper()
		req, e := decodeRunPython([]byte(body))
		if e != nil {
			t.Fatalf("%s: %v", body, e)
		}
		return req.hash()
	}
	same := [][2]string{
		{`{"files":{"a.py":"1","main.py":"2"}}`, `{"files":{"main.py":"2","./a.py":"1"}}`},
		{`{"files":{"main.py":"x"}}`, `{"files":{"main.py":"x"},"stdin":""}`},
		{`{"files":{"main.py":"x"}}`, `{"files":{"main.py":"x"},"command":["python","main.py"]}`},
		{`{"files":{"main.py":"x"}}`, `{"files":{"main.py":"x"},"runtime":"python"}`},
		{`{"files":{"main.py":"x"},"job_id":"a"}`, `{"files":{"main.py":"x"},"job_id":"b"}`},
		{`{"files":{"main.py":"x"},"memory_mb":512}`, `{"files":{"main.py":"x"},"memory_mb":512.0}`},
		{`{"files":{"main.py":"x"},"artifact_paths":["o/a"]}`, `{"files":{"main.py":"x"},"artifact_paths":["./o/a"]}`},
	}
	for _, p := range same {
		if hashOf(p[0]) != hashOf(p[1]) {
			t.Errorf("hashes differ for the same request:\n%s\n%s", p[0], p[1])
		}
	}
	differ := [][2]string{
		{`{"files":{"main.py":"x"}}`, `{"files":{"main.py":"y"}}`},
		{`{"files":{"main.py":"x"}}`, `{"files":{"main2.py":"x"}}`},
		{`{"files":{"main.py":"x"}}`, `{"files":{"main.py":"x"},"stdin":"a"}`},
		{`{"files":{"main.py":"x"}}`, `{"files":{"main.py":"x"},"timeout_seconds":30}`},
		{`{"files":{"main.py":"x"}}`, `{"files":{"main.py":"x"},"artifact_paths":["a"]}`},
		{`{"files":{"main.py":"x"},"command":["python","a.py"]}`, `{"files":{"main.py":"x"},"command":["python","b.py"]}`},
		{`{"files":{"main.py":"x"},"cpus":1}`, `{"files":{"main.py":"x"},"cpus":1.5}`},
	}
	for _, p := range differ {
		if hashOf(p[0]) == hashOf(p[1]) {
			t.Errorf("same hash for different requests:\n%s\n%s", p[0], p[1])
		}
	}
}
