package webapp

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/privrec/privrec/model"
)

// DAPOptions configures the two-aggregator page (static/dap.html), served
// by the leader (`privrec serve --role leader --web`).
type DAPOptions struct {
	// HelperURL is the helper's base URL. The page fetches the helper's
	// HPKE key from the helper itself (cross-origin; the page's CSP allows
	// connecting to that origin and no other), never through the leader.
	HelperURL string
	// Catalogue, when set, gives the items' titles for rating; without it
	// the page lists the item IDs of the tasks' catalogue.
	Catalogue *model.Catalogue
	// Scale is the rating scale offered (default 1–5, whole numbers).
	Scale [2]float64
	// Delta is the δ at which the page states each task's cost, a ρ of
	// zCDP, as (ε, δ)-DP beside the ρ (default 1e-6, the default δ of
	// `privrec dap task create`). It is only a way of reading ρ: the
	// ledgers count ρ.
	Delta float64
}

// Collection is /dap-collection.json: the public facts the page needs
// besides the leader's API — where the helper is, the titles, the scale.
type Collection struct {
	Helper string     `json:"helper"`
	Items  []DAPItem  `json:"items,omitempty"`
	Scale  [2]float64 `json:"scale"`
	Delta  float64    `json:"delta"`
}

// DAPItem is an item of the catalogue and its title.
type DAPItem struct {
	ID    string `json:"id"`
	Title string `json:"title,omitempty"`
}

// NewDAP returns the handler of the two-aggregator page: / (dap.html),
// dap.js, /dap-collection.json, the shared style, wasm_exec.js and the
// module. Its CSP lets the page connect to its own origin (the leader)
// and to the helper's origin only.
func NewDAP(o DAPOptions) (*Handler, error) {
	u, err := url.Parse(o.HelperURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("webapp: the helper's URL %q must be http(s)://host[:port][/path]", o.HelperURL)
	}
	if o.Scale == [2]float64{} {
		o.Scale = [2]float64{1, 5}
	}
	if !(o.Scale[0] < o.Scale[1]) || o.Scale[1]-o.Scale[0] > 100 {
		return nil, fmt.Errorf("webapp: rating scale %v–%v: want min < max, at most 100 apart", o.Scale[0], o.Scale[1])
	}
	if o.Delta == 0 {
		o.Delta = 1e-6
	}
	if !(o.Delta > 0 && o.Delta < 1) {
		return nil, fmt.Errorf("webapp: δ %v: want 0 < δ < 1", o.Delta)
	}
	origin := u.Scheme + "://" + u.Host
	csp := "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self' " + origin + "; img-src 'self'; style-src 'self'; " +
		"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	h, err := newHandler(csp, map[string]string{"/": "dap.html", "/dap.html": "dap.html", "/dap.js": "dap.js"})
	if err != nil {
		return nil, err
	}
	c := Collection{Helper: u.String(), Scale: o.Scale, Delta: o.Delta}
	if o.Catalogue != nil {
		ids, titles := o.Catalogue.IDs(), o.Catalogue.Titles()
		for j, id := range ids {
			it := DAPItem{ID: id}
			if o.Catalogue.HasTitles() {
				it.Title = titles[j]
			}
			c.Items = append(c.Items, it)
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("webapp: %w", err)
	}
	h.files["/dap-collection.json"] = &file{name: "dap-collection.json", ctype: "application/json", body: b, etag: etag(b)}
	return h, nil
}
