package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"boxer"
)

// newTestSession starts a session on z with the engine's default limits,
// changed by mod.
func newTestSession(t *testing.T, z *Zygote, mod func(*boxer.Limits)) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), slow(time.Minute))
	defer cancel()
	lim, err := z.e.JobLimits(boxer.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		mod(&lim)
	}
	w, err := z.Prepare(ctx)
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	s, err := w.StartSession(lim)
	if err != nil {
		w.Destroy()
		t.Fatalf("StartSession: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func execCell(t *testing.T, s *Session, code string, timeout time.Duration) *CellResult {
	t.Helper()
	res, err := s.Exec(context.Background(), code, timeout, nil)
	if err != nil {
		t.Fatalf("Exec(%q): %v", code, err)
	}
	return res
}

// A session keeps its globals, imports, open files and work dir from cell
// to cell; a trailing expression is the cell's value; an exception ends
// the cell, not the session.
func TestSessionKeepsState(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	s := newTestSession(t, z, nil)

	res := execCell(t, s, "import os\nx = 40\nf = open('notes.txt', 'w')\nprint('hi')", slow(10*time.Second))
	if res.Status != boxer.StatusOK || string(res.Stdout.Data) != "hi\n" || res.Value != nil || !res.Alive {
		t.Fatalf("cell 1: %+v stdout %q", res, res.Stdout.Data)
	}
	res = execCell(t, s, "f.write('kept'); f.close()\nx + 2", slow(10*time.Second))
	if res.Status != boxer.StatusOK || res.Value == nil || *res.Value != "42" {
		t.Fatalf("cell 2: %+v", res)
	}
	res = execCell(t, s, "print(open('notes.txt').read(), os.getcwd(), _)\n1/0", slow(10*time.Second))
	if res.Status != boxer.StatusNonzeroExit || res.ExitCode != 1 || string(res.Stdout.Data) != "kept /work 42\n" ||
		res.Error != "ZeroDivisionError: division by zero" || !res.Alive {
		t.Fatalf("cell 3: %+v stdout %q", res, res.Stdout.Data)
	}
	if !strings.Contains(string(res.Stderr.Data), "ZeroDivisionError") || strings.Contains(string(res.Stderr.Data), "zygote_session") {
		t.Errorf("cell 3's traceback shows the kernel or no error: %q", res.Stderr.Data)
	}
	res = execCell(t, s, "x", slow(10*time.Second))
	if res.Value == nil || *res.Value != "40" {
		t.Fatalf("cell 4: %+v", res)
	}
	f, size, reason, err := s.OpenFile("notes.txt", 1<<20)
	if err != nil || reason != "" || size != 4 {
		t.Fatalf("OpenFile: %v %q %v", size, reason, err)
	}
	data, _ := io.ReadAll(f)
	f.Close()
	if string(data) != "kept" {
		t.Errorf("OpenFile read %q", data)
	}
	if err := s.WriteFiles([]boxer.File{{Path: "notes.txt", Content: []byte("new")}, {Path: "d/e.py", Content: []byte("V = 7\n")}}); err != nil {
		t.Fatal(err)
	}
	res = execCell(t, s, "import sys; sys.path.insert(0, 'd'); import e\nopen('notes.txt').read(), e.V", slow(10*time.Second))
	if res.Value == nil || *res.Value != "('new', 7)" {
		t.Fatalf("cell 5: %+v %q", res, res.Stderr.Data)
	}
}

// A cell past its timeout is interrupted and the session goes on; one
// that will not stop is killed with its session.
func TestSessionTimeout(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	s := newTestSession(t, z, nil)

	execCell(t, s, "n = 1", slow(10*time.Second))
	res := execCell(t, s, "while True:\n    n += 1", time.Second)
	if res.Status != boxer.StatusTimeout || !res.Alive || !strings.Contains(string(res.Stderr.Data), "KeyboardInterrupt") {
		t.Fatalf("interrupted cell: %+v stderr %q", res, res.Stderr.Data)
	}
	res = execCell(t, s, "n > 1", slow(10*time.Second))
	if res.Status != boxer.StatusOK || res.Value == nil || *res.Value != "True" {
		t.Fatalf("cell after the timeout: %+v", res)
	}
	res = execCell(t, s, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", time.Second)
	if res.Status != boxer.StatusTimeout || res.Alive || res.Ended == "" {
		t.Fatalf("cell that ignores the interrupt: %+v", res)
	}
	if _, err := s.Exec(context.Background(), "1", time.Second, nil); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("Exec on a killed session: %v, want ErrSessionGone", err)
	}
}

// A cell that runs the session out of memory ends it, and says so.
func TestSessionOOM(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	s := newTestSession(t, z, func(l *boxer.Limits) { l.MemoryBytes = 128 << 20 })
	res := execCell(t, s, "b = bytearray(512 << 20)", slow(20*time.Second))
	if res.Status != boxer.StatusOOM || res.Alive || !strings.Contains(res.Ended, "memory") {
		t.Fatalf("OOM cell: %+v", res)
	}
}

// Figures left open are the cell's PNGs; files a session holds are
// replaced by an upload, and a FIFO in their place is refused without
// blocking.
func TestSessionFiguresAndFiles(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e, "matplotlib.pyplot")
	s := newTestSession(t, z, nil)
	res := execCell(t, s, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.figure()\nplt.bar([1], [2])\nNone", slow(20*time.Second))
	if res.Status != boxer.StatusOK || len(res.Figures) != 2 {
		t.Fatalf("figures: %+v stderr %q", res, res.Stderr.Data)
	}
	for _, png := range res.Figures {
		if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("figure is no PNG: %q", png[:min(len(png), 16)])
		}
	}
	res = execCell(t, s, "len(plt.get_fignums())", slow(10*time.Second))
	if res.Value == nil || *res.Value != "0" || len(res.Figures) != 0 {
		t.Errorf("figures are closed once drawn: %+v", res)
	}
	execCell(t, s, "import os\nos.mkfifo('pipe')\nos.symlink('/etc', 'link')", slow(10*time.Second))
	done := make(chan error, 1)
	go func() { done <- s.WriteFiles([]boxer.File{{Path: "pipe", Content: []byte("x")}}) }()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "not a regular file") && !strings.Contains(err.Error(), "no such device") {
		t.Errorf("upload over a FIFO: %v", err)
	}
	if err := s.WriteFiles([]boxer.File{{Path: "link/x", Content: []byte("x")}}); err == nil {
		t.Errorf("upload through a symlink was accepted")
	}
	if _, _, reason, _ := s.OpenFile("pipe", 1<<20); reason != "refused: is a FIFO" {
		t.Errorf("download of a FIFO: %q", reason)
	}
}

// Caller code shares the kernel's process and so its socket to boxer:
// what it writes there fools only its own session, and what boxer refuses
// (a field it does not know, a packet too large, descriptors) ends that
// session without harm to boxer.
func TestSessionSocketAbuse(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)

	s := newTestSession(t, z, nil)
	// The running cell's id is in the kernel's frame: its answer can be
	// forged, and a guess at a later cell's fools nothing.
	const forge = `import socket, sys, time
f = sys._getframe()
while 'cell' not in f.f_locals:
    f = f.f_back
seq = f.f_locals['cell']['seq']
sk = socket.socket(fileno=3)
for s in (seq, seq + 1, seq + 2, 1, 2):
    sk.send(b'{"op":"done","seq":%d,"exit_code":0,"value":"\'forged\'"}' % s)
time.sleep(0.2)
`
	res := execCell(t, s, forge, slow(10*time.Second))
	if res.Value == nil || *res.Value != "'forged'" || !res.Alive {
		t.Fatalf("a forged done answers its own cell: %+v", res)
	}
	// The kernel's own answer to that cell comes later, and is not the
	// next cell's; nor is any forged for a guessed id.
	for i := 0; i < 3; i++ {
		res = execCell(t, s, "40 + 2", slow(10*time.Second))
		if res.Value == nil || *res.Value != "42" {
			t.Fatalf("cell %d after a forged done: %+v", i, res)
		}
	}

	for name, code := range map[string]string{
		"unknown field": "sk.send(b'{\"op\":\"done\",\"exit_code\":0,\"admin\":true}')",
		// A packet past what boxer reads, where the host lets a socket
		// send one (net.core.wmem_max of 2 MiB or more); elsewhere the
		// kernel refuses it before boxer could (EMSGSIZE), checked below.
		"oversized":   "sk.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)\ntry:\n    sk.send(b'{' + b' ' * (600 << 10) + b'}')\nexcept OSError as e:\n    if e.errno == 90:\n        print('too long to send')\n    raise",
		"descriptors": "import os\nsocket.send_fds(sk, [b'{\"op\":\"figure\",\"data\":\"\",\"last\":true}'], [os.open('/work', os.O_RDONLY)] * 8)\nsk.send(b'junk')",
	} {
		s := newTestSession(t, z, nil)
		res := execCell(t, s, "import socket, time\nsk = socket.socket(fileno=3)\n"+code+"\ntime.sleep(30)", slow(20*time.Second))
		if string(res.Stdout.Data) == "too long to send\n" {
			if !res.Alive || res.Error != "OSError: [Errno 90] Message too long" {
				t.Errorf("%s, refused by the kernel: %+v", name, res)
			}
			continue
		}
		if res.Alive || !strings.Contains(res.Ended, "boxer") {
			t.Errorf("%s: the session lives on: %+v", name, res)
		}
	}
	if n := openFDs(t); n > 200 {
		t.Errorf("boxer holds %d descriptors after sessions sent it some", n)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Closing a session under a running cell ends the cell, which says so;
// calls after it are refused, and none touches the destroyed sandbox.
func TestSessionClosedUnderCall(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	s := newTestSession(t, z, nil)
	done := make(chan *CellResult, 1)
	go func() {
		res, err := s.Exec(context.Background(), "print('spinning', flush=True)\nwhile True:\n    pass", slow(time.Minute), func(boxer.Stream, []byte) {
			go s.Close() // once the cell is surely running
		})
		if err != nil {
			t.Errorf("Exec: %v", err)
		}
		done <- res
	}()
	res := <-done
	if res == nil || res.Alive || res.Ended != "closed" {
		t.Fatalf("cell under Close: %+v", res)
	}
	s.Close() // returns once the Close under way is done
	if _, err := s.Exec(context.Background(), "1", time.Second, nil); !errors.Is(err, ErrSessionGone) {
		t.Errorf("Exec after Close: %v", err)
	}
	if err := s.WriteFiles([]boxer.File{{Path: "a", Content: []byte("x")}}); !errors.Is(err, ErrSessionGone) {
		t.Errorf("WriteFiles after Close: %v", err)
	}
	if _, err := s.Memory(); !errors.Is(err, ErrSessionGone) {
		t.Errorf("Memory after Close: %v", err)
	}
}

// A kernel that stops taking cells (caller code answered its own cell and
// kept the thread) cannot hold boxer: the next cell times out and ends
// the session, and Close returns.
func TestSessionKernelStopsReading(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	s := newTestSession(t, z, nil)
	const stuck = `import signal, socket, sys, threading, time
f = sys._getframe()
while 'cell' not in f.f_locals:
    f = f.f_back
seq = f.f_locals['cell']['seq']
signal.signal(signal.SIGINT, signal.SIG_IGN)
threading.Thread(target=lambda: socket.socket(fileno=3).send(b'{"op":"done","seq":%d,"exit_code":0}' % seq)).start()
while True:
    time.sleep(1)
`
	if res := execCell(t, s, stuck, slow(10*time.Second)); !res.Alive {
		t.Fatalf("first cell: %+v", res)
	}
	big := "#" + strings.Repeat("\x01", 60000)
	started := time.Now()
	res, err := s.Exec(context.Background(), big, time.Second, nil)
	if err == nil && (res.Alive || res.Status != boxer.StatusTimeout) {
		t.Fatalf("a cell the kernel never takes: %+v", res)
	}
	if err != nil && !errors.Is(err, ErrSessionGone) {
		t.Fatalf("a cell the kernel never takes: %v", err)
	}
	if d := time.Since(started); d > sendTimeout+interruptGrace+slow(10*time.Second) {
		t.Errorf("the cell took %v to give up", d)
	}
	s.Close()
}

// Caller code flooding the socket ends its session: boxer reads no more
// than a cell's answer.
func TestSessionSocketFlood(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	s := newTestSession(t, z, nil)
	res := execCell(t, s, `import socket
sk = socket.socket(fileno=3)
junk = b'{"op":"figure","seq":-5,"data":"' + b'A' * (150 << 10) + b'","last":false}'
while True:
    sk.send(junk)
`, slow(20*time.Second))
	if res.Alive || !strings.Contains(res.Ended, "more than a cell's answer") {
		t.Fatalf("flood: %+v", res)
	}
}

// A kernel that dies between cells is known dead at once, not at the next
// cell, which is refused.
func TestSessionDiesBetweenCells(t *testing.T) {
	e := newTestEngine(t, nil)
	z := newTestZygote(t, e)
	s := newTestSession(t, z, nil)
	died := make(chan struct{})
	s.OnDeath(func() { close(died) })
	execCell(t, s, "import os, threading\nthreading.Thread(target=lambda: (__import__('time').sleep(0.2), os._exit(0))).start()", slow(10*time.Second))
	<-died
	if alive, why := s.Alive(); alive || why != "the session's interpreter exited" {
		t.Fatalf("after its kernel died: alive %v, %q", alive, why)
	}
	if _, err := s.Exec(context.Background(), "1", time.Second, nil); !errors.Is(err, ErrSessionGone) {
		t.Fatalf("a cell after the kernel died: %v", err)
	}
}
