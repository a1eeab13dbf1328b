package warm

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"boxer/internal/sandbox/nsinit"
)

// zygote.py speaks the warm path's protocol as protocol.go declares it: it
// takes a Job exactly as boxer marshals it, refuses one of another shape,
// and every message it can send decodes into a Msg with no field left
// over and every value where boxer reads it. A field added, renamed or
// dropped on one side only fails here.
func TestZygoteSpeaksTheProtocol(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	job := Job{Form: "file", Target: "main.py", Args: []string{"a b", "", "é\n"}, Argv0: "python3",
		Rlimits: []nsinit.Rlimit{{Resource: 7, Cur: 256, Max: 512}, {Resource: 4, Cur: 0, Max: 1 << 40}}}
	b, err := job.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// Each malformed: its last field not NUL-ended (twice), fewer fields
	// than its count of rlimits needs, a count that is no number, a form
	// the child does not know.
	bad := []string{string(b[:len(b)-1]), string(b) + "x", "file\x00main.py\x00python3\x002\x007\x00256\x00512\x00",
		"file\x00main.py\x00python3\x00one\x00", "shell\x00main.py\x00python3\x000\x00"}
	const script = `import json
j = z._job(bytes.fromhex(sys.argv[2]))
print(json.dumps([j["form"], j["target"], j["argv0"], j["args"], j["rlimits"]]))
refused = 0
for m in sys.argv[3:]:
    try:
        z._job(bytes.fromhex(m))
    except ValueError:
        refused += 1
print("refused %d" % refused)
print(json.dumps(sorted(z._SAMPLES), separators=(",", ":")))
for m in (z._HELLO, z._GO, z._READY, z._FORKED % (12, 3), z._EXITED % (12, 256), z._REFUSED % (31, 0, 0),
          z._FORK_FAILED % (3, 12), json.dumps(z._error(OSError(1, "x"))).encode(),
          json.dumps(z._zygote_ready(["a"], ["b"], ["c: why"], 4096, 5, 6)).encode()):
    print(m.decode())
`
	args := []string{hex.EncodeToString(b)}
	for _, m := range bad {
		args = append(args, hex.EncodeToString([]byte(m)))
	}
	out, err := runZygoteModule(t, script, args...)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 12 {
		t.Fatalf("%d lines: %s", len(lines), out)
	}
	var rlimits [][3]uint64
	for _, r := range job.Rlimits {
		rlimits = append(rlimits, [3]uint64{uint64(r.Resource), r.Cur, r.Max})
	}
	want, _ := json.Marshal([]any{job.Form, job.Target, job.Argv0, job.Args, rlimits})
	var got, wantAny any
	_ = json.Unmarshal(want, &wantAny)
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil || !reflect.DeepEqual(got, wantAny) {
		t.Errorf("zygote.py read the job as %s, want %s", lines[0], want)
	}
	if w := fmt.Sprintf("refused %d", len(bad)); lines[1] != w {
		t.Errorf("malformed jobs: %s, want %s", lines[1], w)
	}
	if w, _ := json.Marshal(Samples); lines[2] != string(w) {
		t.Errorf("zygote.py has samples %s, Samples declares %s", lines[2], w)
	}
	lines = lines[1:]
	if _, err := (Job{Form: "command", Target: "print(1)\x00", Argv0: "python"}).Marshal(); err == nil {
		t.Error("a job with a NUL in its code marshalled")
	}
	wantMsgs := []Msg{
		{Op: OpHello},
		{Op: OpGo},
		{Op: OpReady},
		{Op: OpForked, Pid: 12, ID: 3},
		{Op: OpExited, Pid: 12, Status: 256},
		{Op: OpError, Msg: "malformed fork request: 31 bytes, 0 descriptors, flags 0x0"},
		{Op: OpError, ID: 3, Msg: "fork failed: errno 12"},
		{Op: OpError, Msg: "PermissionError: [Errno 1] x"},
		{Op: OpReady, Preimported: []string{"a"}, Missing: []string{"b"}, Unlearned: []string{"c: why"}, HugeTextBytes: 4096, LearnedPages: 5, PinnedPages: 6},
	}
	for i, w := range wantMsgs {
		got, err := Decode([]byte(lines[2+i]))
		if err != nil || !reflect.DeepEqual(got, w) {
			t.Errorf("message %s: %+v (%v), want %+v", lines[2+i], got, err, w)
		}
	}
}

// A pre-import whose first use the zygote learns is marked on its line;
// one that is no pre-import, or has no sample, is refused.
func TestConfigLearn(t *testing.T) {
	b, err := Config{PreImports: []string{"json", "pytest"}, Learn: []string{"pytest"}}.Marshal()
	if err != nil || !strings.HasSuffix(string(b), "\njson\n+pytest") {
		t.Errorf("config %q (%v), want it to end with json and +pytest", b, err)
	}
	for _, c := range []Config{
		{PreImports: []string{"json"}, Learn: []string{"json"}},
		{PreImports: []string{"json"}, Learn: []string{"pytest"}},
		{PreImports: []string{"+json"}},
	} {
		if b, err := c.Marshal(); err == nil {
			t.Errorf("%+v marshalled: %q", c, b)
		}
	}
}

// _read_all gives what a pipe held once its writer is gone, and gives up
// on a writer that neither writes nor goes (a sample child that hangs).
func TestZygoteReadAllGivesUp(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	const script = `
r, w = os.pipe()
os.write(w, b"x" * 60000)  # within the pipe's buffer: nobody reads yet
os.close(w)
print(len(z._read_all(r, 5)))
r, w = os.pipe()
os.write(w, b"partial")
try:
    z._read_all(r, 0.2)
except RuntimeError as e:
    print(e)
`
	out, err := runZygoteModule(t, script)
	if want := "60000\nthe sample child's job ran past 0.2 s\n"; err != nil || string(out) != want {
		t.Errorf("got %q (%v), want %q", out, err, want)
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
