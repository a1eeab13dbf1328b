package x402

import (
	"net/http"
	"slices"
	"time"
)

// Discovery is boxer's GET /.well-known/x402: the priced routes, each with
// exactly what its 402 challenge asks for, so that a catalog or an agent
// learns the prices before it calls. No specification fixes this document
// yet, so it carries the two shapes clients read:
//
//   - x402Version, items and pagination: the listing of the x402
//     specification's discovery API (§8, GET /discovery/resources), one
//     item per priced route, whose accepts are the route's challenge's.
//     lastUpdated is an ISO 8601 time, as the official Go and TypeScript
//     clients decode it (the specification's table says a Unix time).
//     metadata holds the challenge's description, mime type and
//     extensions: the bazaar block, the route's input and output.
//   - version, resources and instructions: the well-known document that
//     catalogs such as x402scan read (version 1, the resources' URLs).
type Discovery struct {
	X402Version int                  `json:"x402Version"`
	Items       []DiscoveredResource `json:"items"`
	Pagination  Pagination           `json:"pagination"`

	Version      int      `json:"version"`
	Resources    []string `json:"resources"`
	Instructions string   `json:"instructions,omitempty"`
}

// DiscoveredResource is one priced route in a Discovery.
type DiscoveredResource struct {
	Resource    string                `json:"resource"`
	Type        string                `json:"type"`
	X402Version int                   `json:"x402Version"`
	Accepts     []PaymentRequirements `json:"accepts"`
	LastUpdated string                `json:"lastUpdated"`
	Metadata    DiscoveryMetadata     `json:"metadata"`
}

// DiscoveryMetadata is what a DiscoveredResource's challenge says besides
// its requirements.
type DiscoveryMetadata struct {
	Description string               `json:"description"`
	MimeType    string               `json:"mimeType"`
	Extensions  map[string]Extension `json:"extensions,omitempty"`
}

// Pagination is a Discovery's: the whole listing in one page.
type Pagination struct {
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
	Total  int `json:"total"`
}

// Discovery returns the discovery document as seen by request r (its URLs
// are the ones r's challenges would name), whose instructions point a
// reader at docPath ("/llms.txt"), the service's own description; ok is
// false when nothing is priced. since is when the prices took effect: the
// items' lastUpdated.
func (p *Payments) Discovery(r *http.Request, docPath string, since time.Time) (d *Discovery, ok bool) {
	if !p.Enabled() {
		return nil, false
	}
	routes := make([]string, 0, len(p.offers))
	for route := range p.offers {
		routes = append(routes, route)
	}
	slices.Sort(routes)
	d = &Discovery{X402Version: Version, Items: []DiscoveredResource{}, Version: 1, Resources: []string{},
		Instructions: "Each resource is paid per call with x402 v2 (HTTP 402, PAYMENT-SIGNATURE); how to call it: " + resourceURL(p.cfg.PublicURL, r, docPath)}
	for _, route := range routes {
		pr, _ := p.PaymentRequired(route, r)
		d.Items = append(d.Items, DiscoveredResource{
			Resource:    pr.Resource.URL,
			Type:        "http",
			X402Version: pr.X402Version,
			Accepts:     pr.Accepts,
			LastUpdated: since.UTC().Format(time.RFC3339),
			Metadata:    DiscoveryMetadata{Description: pr.Resource.Description, MimeType: pr.Resource.MimeType, Extensions: pr.Extensions},
		})
		d.Resources = append(d.Resources, pr.Resource.URL)
	}
	d.Pagination = Pagination{Limit: len(d.Items), Offset: 0, Total: len(d.Items)}
	return d, true
}
