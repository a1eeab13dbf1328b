package warm

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"boxer/internal/sandbox/nsinit"
)

// zygote.py speaks the warm path's protocol as protocol.go declares it: it
// takes a Job exactly as boxer marshals it, refuses one with a field
// it does not read, and every message it can send decodes into a Msg
// with no field left over and every value where boxer reads it. A field
// added, renamed or dropped on one side only fails here.
func TestZygoteSpeaksTheProtocol(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	job := Job{Form: "file", Target: "main.py", Args: []string{"a b"}, Argv0: "python3",
		Rlimits: []nsinit.Rlimit{{Resource: 7, Cur: 256, Max: 512}}}
	b := job.Marshal()
	var more map[string]any
	if err := json.Unmarshal(b, &more); err != nil {
		t.Fatal(err)
	}
	more["cwd"] = "/work"
	extra, _ := json.Marshal(more)
	const script = `import json
print(json.dumps(z._job(sys.argv[2].encode())))
try:
    z._job(sys.argv[3].encode())
    print("accepted")
except ValueError:
    print("refused")
for m in (z._HELLO, z._GO, z._READY, z._FORKED % (12, 3), z._EXITED % (12, 256), z._REFUSED % (31, 0, 0),
          z._FORK_FAILED % (3, 12), json.dumps(z._error(OSError(1, "x"))).encode(),
          json.dumps(z._zygote_ready(["a"], ["b"], 4096, 5, 6)).encode()):
    print(m.decode())
`
	out, err := runZygoteModule(t, script, string(b), string(extra))
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 11 {
		t.Fatalf("%d lines: %s", len(lines), out)
	}
	var back Job
	d := json.NewDecoder(strings.NewReader(lines[0]))
	d.DisallowUnknownFields()
	if err := d.Decode(&back); err != nil || !reflect.DeepEqual(back, job) {
		t.Errorf("zygote.py read the job as %s (%v), want %s", lines[0], err, b)
	}
	if lines[1] != "refused" {
		t.Errorf("a job with a field zygote.py does not read: %s, want refused", lines[1])
	}
	want := []Msg{
		{Op: OpHello},
		{Op: OpGo},
		{Op: OpReady},
		{Op: OpForked, Pid: 12, ID: 3},
		{Op: OpExited, Pid: 12, Status: 256},
		{Op: OpError, Msg: "malformed fork request: 31 bytes, 0 descriptors, flags 0x0"},
		{Op: OpError, ID: 3, Msg: "fork failed: errno 12"},
		{Op: OpError, Msg: "PermissionError: [Errno 1] x"},
		{Op: OpReady, Preimported: []string{"a"}, Missing: []string{"b"}, HugeTextBytes: 4096, LearnedPages: 5, PinnedPages: 6},
	}
	for i, w := range want {
		got, err := Decode([]byte(lines[2+i]))
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("message %s: %+v (%v), want %+v", lines[2+i], got, err, w)
		}
	}
}

// zygote_session.py's messages decode into CellMsg with nothing left
// over, and a Cell as boxer marshals it is what the kernel runs.
func TestSessionKernelSpeaksTheProtocol(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	const script = `import json, sys
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import zygote_session as k
main = type(sys)("__main__")
cell = json.loads(sys.argv[2])
for code in (cell["code"], "1/0", "import sys; sys.exit(3)"):
    print(json.dumps(dict(k._cell(code, main, z._exit_code), seq=cell["seq"])))
print(json.dumps({"op": "figure", "seq": cell["seq"], "data": "AAAA", "last": True}))
`
	cell := Cell{Op: OpCell, Seq: 7, Code: "x = '<&>'\nx * 2"}
	out, err := runZygoteModule(t, script, string(cell.Marshal()))
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var lines []string // the messages, not the traceback 1/0 prints
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "{") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 4 {
		t.Fatalf("%d messages: %s", len(lines), out)
	}
	value := "'<&><&>'"
	want := []CellMsg{
		{Op: OpDone, Seq: 7, Value: &value},
		{Op: OpDone, Seq: 7, ExitCode: 1, Error: "ZeroDivisionError: division by zero"},
		{Op: OpDone, Seq: 7, ExitCode: 3},
		{Op: OpFigure, Seq: 7, Data: "AAAA", Last: true},
	}
	for i, w := range want {
		got, err := DecodeCellMsg([]byte(lines[i]))
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("message %s: %+v (%v), want %+v", lines[i], got, err, w)
		}
	}
	if _, err := DecodeCellMsg([]byte(`{"op":"done","exit_code":0,"extra":1}`)); err == nil {
		t.Error("a field CellMsg does not know was accepted")
	}
	if _, err := DecodeCellMsg([]byte(`{"op":"hello"}`)); err == nil {
		t.Error("an op of no session message was accepted")
	}
}
