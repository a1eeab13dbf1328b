package web

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"boxer/internal/observe"
)

// chart is seed 004's third use case: a matplotlib chart saved to
// output/chart.png, returned as an artifact.
const chart = `import os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
os.makedirs("output", exist_ok=True)
plt.plot([1, 2, 3, 4], [1, 4, 9, 16], marker="o")
plt.title("squares")
plt.savefig("output/chart.png")
print("saved")
`

// The playground in a real headless Chromium against the real boxer: the
// test types seed 004's matplotlib example, runs it, and checks that the
// chart is displayed; it saves a screenshot (BOXER_TEST_ARTIFACTS, or the
// system's temporary directory). With payments on, the page tells the
// visitor how to pay instead.
func TestPlaygroundInChromium(t *testing.T) {
	browser := "/usr/bin/chromium"
	if _, err := os.Stat(browser); err != nil {
		t.Fatalf("no %s: scripts/setup.sh --test installs Debian's chromium", browser)
	}
	bin := buildBoxer(t)

	url := serve(t, bin)
	ctx := newBrowser(t, browser)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(chromedp.ID("code")),
		chromedp.Clear(chromedp.ID("code")),
		chromedp.SendKeys(chromedp.ID("code"), chart),
		chromedp.SendKeys(chromedp.ID("artifacts-in"), "output/chart.png"),
		chromedp.SetValue(chromedp.ID("timeout"), "20"),
		chromedp.SetValue(chromedp.ID("memory"), "512"),
		chromedp.Click(chromedp.ID("run")),
	); err != nil {
		t.Fatalf("browser: %v", err)
	}
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS("img.artifact-image")))
	width := run(t, ctx, chromedp.Poll[int](`(() => { const i = document.querySelector("img.artifact-image"); return i.complete && i.naturalWidth; })()`))
	status, stdout, exit := run(t, ctx, chromedp.Text(chromedp.ID("status"))), run(t, ctx, chromedp.Text(chromedp.ID("stdout"))), run(t, ctx, chromedp.Text(chromedp.ID("exit")))
	typed := run(t, ctx, chromedp.Evaluate[string](`document.getElementById("code").value`))
	if typed != chart || status != "ok" || stdout != "saved\n" || exit != "0" || width < 100 {
		t.Fatalf("status %q, stdout %q, exit %q, chart %d px wide; typed %q", status, stdout, exit, width, typed)
	}
	// The page's CSP admits its own script by hash and nothing else: an
	// inline script inserted into the page does not run.
	injected := run(t, ctx, chromedp.Evaluate[bool](`(() => { const s = document.createElement("script"); s.textContent = "window.injected = true"; document.body.appendChild(s); return window.injected === true; })()`))
	if injected {
		t.Fatal("an inline script inserted into the page ran: the CSP does not hold")
	}
	shot := run(t, ctx, chromedp.FullScreenshot(100))
	dir := os.Getenv("BOXER_TEST_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, "boxer-playground.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the playground with the chart: %s (%d bytes)", path, len(shot))

	// Payments on: the page explains, and runs nothing. The facilitator is
	// never reached: an unpaid call is answered from the configuration.
	url = serve(t, bin, "--payments", "x402", "--x402-pay-to", "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
		"--x402-facilitator-url", "http://127.0.0.1:9")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(chromedp.ID("code")),
		chromedp.Click(chromedp.ID("run")),
		chromedp.WaitVisible(chromedp.ID("pay")),
	); err != nil {
		t.Fatalf("browser, payments on: %v", err)
	}
	pay, status := run(t, ctx, chromedp.Text(chromedp.ID("pay"))), run(t, ctx, chromedp.Text(chromedp.ID("status")))
	if status != "Payment required" || !strings.Contains(pay, "charges for runs through x402: 0.01 USD Coin a run on eip155:8453") ||
		!strings.Contains(pay, "API key") {
		t.Fatalf("payments on: status %q, notice %q", status, pay)
	}
}

// run runs one action in the browser and returns its value.
func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

func buildBoxer(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the playground runs real sandboxes: run the tests as root")
	}
	bin := filepath.Join(t.TempDir(), "boxer")
	if out, err := exec.Command("go", "build", "-o", bin, "boxer/cmd/boxer").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serve starts boxer serve on a free loopback port and returns its URL,
// read from its "serving" log line.
func serve(t *testing.T, bin string, args ...string) string {
	t.Helper()
	state, err := os.MkdirTemp("/run", "boxer-web-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(state) })
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--state-dir", state,
		"--data-dir", t.TempDir(), "--pool-preimport", "", "--shutdown-grace", "5s"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	url, err := observe.Serving(stderr, nil)
	if err != nil {
		t.Fatalf("boxer serve: %v", err)
	}
	return url
}

func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // as root, Chromium's own sandbox cannot start
		chromedp.WindowSize(1280, 900),
	)
	// A deadline on the whole: the browser lives as long as the context
	// of its first action, so the deadline is set before, not per action.
	root, cancel0 := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel0)
	actx, cancel := chromedp.NewExecAllocator(root, opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx, chromedp.WithErrorf(func(f string, a ...any) { t.Logf("chromedp: "+f, a...) }))
	t.Cleanup(cancel2)
	return ctx
}
