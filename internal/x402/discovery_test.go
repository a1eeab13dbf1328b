package x402

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"
)

// The discovery document lists every priced route once, in path order,
// and each item asks for exactly what that route's 402 challenge asks for:
// the same requirements, description and extensions, at the same URL.
func TestDiscoveryMatchesChallenges(t *testing.T) {
	cfg := testConfig()
	cfg.Routes = append(cfg.Routes, Route{Path: "/v1/sessions", Price: "0.05", Description: "Start a session"})
	p, err := New(cfg, Deps{Nonces: NewMemoryNonceStore()})
	if err != nil {
		t.Fatal(err)
	}
	since := time.Date(2026, 12, 3, 17, 0, 0, 0, time.FixedZone("CET", 3600))
	r := httptest.NewRequest(http.MethodGet, "http://boxer.test/.well-known/x402", nil)
	d, ok := p.Discovery(r, "/llms.txt", since)
	if !ok {
		t.Fatal("payments on, but no discovery document")
	}
	wantPaths := []string{"/v1/exec", "/v1/run-python", "/v1/sessions"}
	if len(d.Items) != len(wantPaths) || len(d.Resources) != len(wantPaths) {
		t.Fatalf("%d items and %d resources, want %d each", len(d.Items), len(d.Resources), len(wantPaths))
	}
	if d.X402Version != 2 || d.Version != 1 || d.Pagination != (Pagination{Limit: 3, Offset: 0, Total: 3}) {
		t.Fatalf("header fields: x402Version %d, version %d, pagination %+v", d.X402Version, d.Version, d.Pagination)
	}
	if want := "Each resource is paid per call with x402 v2 (HTTP 402, PAYMENT-SIGNATURE); how to call it: http://boxer.test/llms.txt"; d.Instructions != want {
		t.Fatalf("instructions = %q", d.Instructions)
	}
	for i, path := range wantPaths {
		item := d.Items[i]
		// The challenge as a caller gets it: an unpaid POST through Wrap.
		w := httptest.NewRecorder()
		p.Wrap(path, http.NotFoundHandler(), testFail).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "http://boxer.test"+path, nil))
		pr := challengeOf(t, w)
		if item.Resource != pr.Resource.URL || d.Resources[i] != pr.Resource.URL || item.Resource != "http://boxer.test"+path {
			t.Errorf("%s: resource %q, listed %q, challenge's %q", path, item.Resource, d.Resources[i], pr.Resource.URL)
		}
		if item.Type != "http" || item.X402Version != 2 || item.LastUpdated != "2026-12-03T16:00:00Z" {
			t.Errorf("%s: type %q, x402Version %d, lastUpdated %q", path, item.Type, item.X402Version, item.LastUpdated)
		}
		// Compared as the JSON a client decodes, not as Go values.
		for what, pair := range map[string][2]any{
			"accepts":     {item.Accepts, pr.Accepts},
			"extensions":  {item.Metadata.Extensions, pr.Extensions},
			"description": {item.Metadata.Description, pr.Resource.Description},
			"mimeType":    {item.Metadata.MimeType, pr.Resource.MimeType},
		} {
			if got, want := jsonOf(t, pair[0]), jsonOf(t, pair[1]); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s differ:\n listed    %v\n challenge %v", path, what, got, want)
			}
		}
	}
	if d.Items[1].Accepts[0].Amount != "10000" || d.Items[2].Accepts[0].Amount != "50000" {
		t.Errorf("amounts %s, %s; want 10000 and 50000", d.Items[1].Accepts[0].Amount, d.Items[2].Accepts[0].Amount)
	}

	// --x402-public-url names the resources as the challenges do.
	cfg.PublicURL = "https://boxer.example/"
	p, err = New(cfg, Deps{Nonces: NewMemoryNonceStore()})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ = p.Discovery(r, "/llms.txt", since); d.Resources[0] != "https://boxer.example/v1/exec" || d.Instructions[len(d.Instructions)-len("https://boxer.example/llms.txt"):] != "https://boxer.example/llms.txt" {
		t.Errorf("with a public URL: resources %v, instructions %q", d.Resources, d.Instructions)
	}
}

func TestDiscoveryOffWhenFree(t *testing.T) {
	p, err := New(DefaultConfig(), Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := p.Discovery(httptest.NewRequest(http.MethodGet, "/.well-known/x402", nil), "/llms.txt", time.Now()); ok || d != nil {
		t.Fatalf("payments off, yet a document: %+v", d)
	}
}

func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
