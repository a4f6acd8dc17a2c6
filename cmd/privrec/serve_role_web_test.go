package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDAPPage: the leader's --web page has the titles of --items, the
// --scale and a CSP naming the helper's origin; bad flags are usage errors.
func TestDAPPage(t *testing.T) {
	items := filepath.Join(t.TempDir(), "items.tsv")
	if err := os.WriteFile(items, []byte("1\tToy Story (1995)\n2\tJumanji (1995)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := dapPage("http://127.0.0.1:8091", items, "0:10")
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/dap-collection.json", nil))
	if body := w.Body.String(); !strings.Contains(body, `"title":"Jumanji (1995)"`) || !strings.Contains(body, `"scale":[0,10]`) {
		t.Errorf("collection %s", body)
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' http://127.0.0.1:8091;") {
		t.Errorf("CSP %q", csp)
	}
	for _, c := range []struct{ helper, items, scale, want string }{
		{"", "", "1:5", "helper's URL"},
		{"http://h", "", "5", "--scale"},
		{"http://h", filepath.Join(t.TempDir(), "none"), "1:5", "--items"},
	} {
		if _, err := dapPage(c.helper, c.items, c.scale); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
