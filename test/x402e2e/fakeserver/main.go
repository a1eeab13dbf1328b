// Command fakeserver stands in for `boxer serve` in the x402 end-to-end
// harness until the real server exists: it mounts internal/x402's middleware
// over a handler that answers /v1/exec as boxer would for print(2 + 2),
// without running anything.
//
// Configuration comes from the environment variables boxer itself reads
// (BOXER_PAYMENTS, BOXER_X402_PAY_TO, BOXER_X402_FACILITATOR_URL,
// BOXER_X402_NETWORK, BOXER_X402_ASSET, ...), the listen address from
// --listen. GET /debug/handler-calls tells the harness how many times the
// paid handler ran, so it can prove that refused payments ran nothing.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"boxer/internal/x402"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fakeserver:", err)
		os.Exit(1)
	}
}

// configFromEnv reads the payment config as boxer's flags would set it.
func configFromEnv() x402.Config {
	cfg := x402.DefaultConfig()
	set := func(dst *string, key string) {
		if v, ok := os.LookupEnv(key); ok {
			*dst = v
		}
	}
	set(&cfg.Mode, "BOXER_PAYMENTS")
	set(&cfg.PayTo, "BOXER_X402_PAY_TO")
	set(&cfg.FacilitatorURL, "BOXER_X402_FACILITATOR_URL")
	set(&cfg.FacilitatorAuthHeader, "BOXER_X402_FACILITATOR_AUTH_HEADER")
	set(&cfg.Network, "BOXER_X402_NETWORK")
	set(&cfg.Asset, "BOXER_X402_ASSET")
	set(&cfg.AssetName, "BOXER_X402_ASSET_NAME")
	set(&cfg.AssetVersion, "BOXER_X402_ASSET_VERSION")
	set(&cfg.PublicURL, "BOXER_X402_PUBLIC_URL")
	return cfg
}

func run() error {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (loopback only)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var calls atomic.Int64
	pay, err := x402.New(configFromEnv(), x402.Deps{
		Nonces: x402.NewMemoryNonceStore(),
		Logger: log,
		OnSettled: func(s x402.Settlement) {
			log.Info("settled", "payer", s.Payer, "tx", s.Transaction)
		},
	})
	if err != nil {
		return err
	}

	exec := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"success":true,"result":{"stdout":"4\n","stderr":"","exitCode":0,"durationMs":1,"timedOut":false}}`)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/exec", pay.Wrap("/v1/exec", exec))
	mux.HandleFunc("GET /debug/handler-calls", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d\n", calls.Load())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		ln.Close()
		return fmt.Errorf("refusing to listen on non-loopback %s", ip)
	}
	log.Info("listening", "addr", ln.Addr().String())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
