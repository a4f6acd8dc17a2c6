package webapp_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/privrec/privrec/model"
	"github.com/privrec/privrec/webapp"
	"github.com/privrec/privrec/webapp/internal/wasmbuild"
)

// TestHandler: paths, types, the Content-Security-Policy, gzip for the
// module when accepted, 404 and 405.
func TestHandler(t *testing.T) {
	h, err := webapp.New()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := h.WASM()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw, []byte("\x00asm")) {
		t.Fatalf("the embedded module is not WebAssembly (starts %q)", raw[:min(8, len(raw))])
	}
	for _, c := range []struct {
		method, path, accept string
		status               int
		ctype, encoding      string
	}{
		{"GET", "/", "", 200, "text/html; charset=utf-8", ""},
		{"GET", "/index.html", "", 200, "text/html; charset=utf-8", ""},
		{"HEAD", "/", "", 200, "text/html; charset=utf-8", ""},
		{"GET", "/app.js", "", 200, "text/javascript; charset=utf-8", ""},
		{"GET", "/style.css", "", 200, "text/css; charset=utf-8", ""},
		{"GET", "/wasm_exec.js", "", 200, "text/javascript; charset=utf-8", ""},
		{"GET", "/privrec.wasm", "gzip, deflate, br", 200, "application/wasm", "gzip"},
		{"GET", "/privrec.wasm", "", 200, "application/wasm", ""},
		{"GET", "/privrec.wasm", "gzip;q=0", 200, "application/wasm", ""},
		{"GET", "/privrec.wasm.gz", "", 404, "", ""},
		{"GET", "/static/app.js", "", 404, "", ""},
		{"GET", "/../go.mod", "", 404, "", ""},
		{"POST", "/", "", 405, "", ""},
	} {
		t.Run(c.method+c.path+c.accept, func(t *testing.T) {
			req := httptest.NewRequest(c.method, "http://x"+c.path, nil)
			if c.accept != "" {
				req.Header.Set("Accept-Encoding", c.accept)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d", w.Code, c.status)
			}
			if got := w.Header().Get("Content-Security-Policy"); got != webapp.CSP || !strings.Contains(got, "default-src 'self'") {
				t.Fatalf("CSP %q", got)
			}
			if c.status != 200 {
				return
			}
			if got := w.Header().Get("Content-Type"); got != c.ctype {
				t.Fatalf("Content-Type %q, want %q", got, c.ctype)
			}
			if got := w.Header().Get("Content-Encoding"); got != c.encoding {
				t.Fatalf("Content-Encoding %q, want %q", got, c.encoding)
			}
			if c.path != "/privrec.wasm" || c.method == "HEAD" {
				return
			}
			body := w.Body.Bytes()
			if c.encoding == "gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(body, raw) {
				t.Fatal("the module served differs from the embedded one")
			}
		})
	}
}

// TestNoOutsideAssets: the page's files reference nothing outside the
// server (no scheme-qualified or protocol-relative URL in src, href or
// fetch), so the CSP is never what stops a request.
func TestNoOutsideAssets(t *testing.T) {
	ext := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:|//)|fetch\(\s*["'](https?:|//)|@import|\burl\(`)
	for _, name := range []string{"static/index.html", "static/app.js", "static/common.js", "static/dap.html", "static/dap.js", "static/style.css"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if m := ext.Find(b); m != nil {
			t.Errorf("%s references an outside asset: %q", name, m)
		}
	}
}

// TestWASMFresh: the committed module is what `go generate ./webapp`
// builds from the current source. Builds are reproducible for one Go
// version (-trimpath, -buildvcs=false, -ldflags=-s -w), not across
// versions, so the comparison runs only when this toolchain is the one
// recorded in static/privrec.wasm.version (else it skips, saying so).
// wasm_exec.js must be this toolchain's too. Not in -short mode: the
// build takes tens of seconds.
func TestWASMFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("rebuilding the module runs in the full go test (not -short)")
	}
	ver, err := os.ReadFile("static/privrec.wasm.version")
	if err != nil {
		t.Fatal(err)
	}
	recorded, _, _ := strings.Cut(string(ver), "\n")
	ctx := context.Background()
	goVer, err := wasmbuild.GoVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if goVer != recorded {
		t.Skipf("the committed module was built by %s, this toolchain is %s (runtime %s): builds are reproducible within one Go version only, so no comparison",
			recorded, goVer, runtime.Version())
	}
	h, err := webapp.New()
	if err != nil {
		t.Fatal(err)
	}
	committed, err := h.WASM()
	if err != nil {
		t.Fatal(err)
	}
	built, err := wasmbuild.Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, committed) {
		t.Fatalf("webapp/static/privrec.wasm.gz is stale (committed %d bytes, sha256 %x; the source builds %d bytes, sha256 %x): run `go generate ./webapp` and commit",
			len(committed), sha256.Sum256(committed), len(built), sha256.Sum256(built))
	}
	if want := fmt.Sprintf("sha256 %x\n", sha256.Sum256(built)); !strings.Contains(string(ver), want) {
		t.Errorf("static/privrec.wasm.version does not record %q: run `go generate ./webapp`", want)
	}
	js, err := wasmbuild.WasmExec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	committedJS, err := os.ReadFile("static/wasm_exec.js")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(js, committedJS) {
		t.Fatal("webapp/static/wasm_exec.js differs from this toolchain's: run `go generate ./webapp`")
	}
	if !bytes.HasPrefix(committedJS, []byte("// Copyright 2018 The Go Authors. All rights reserved.")) {
		t.Error("wasm_exec.js lost its licence header")
	}
	t.Logf("privrec.wasm: %d bytes, %d gzip-compressed (%s)", len(committed), len(h.CompressedWASM()), recorded)
}

var _ http.Handler = (*webapp.Handler)(nil)

// TestDAPHandler: the two-aggregator page at /, its CSP allowing the
// helper's origin (and no other), the collection facts, and refused
// helper URLs.
func TestDAPHandler(t *testing.T) {
	cat, err := model.NewCatalogue([]string{"a", "b"}, []string{"Alien", ""})
	if err != nil {
		t.Fatal(err)
	}
	h, err := webapp.NewDAP(webapp.DAPOptions{HelperURL: "https://helper.example:8443/agg", Catalogue: cat})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "http://x"+path, nil))
		return w
	}
	for path, want := range map[string]string{"/": "dap.js", "/dap.js": "dapPrepare", "/common.js": "startWasm", "/dap-collection.json": `"helper":"https://helper.example:8443/agg"`} {
		w := get(path)
		if w.Code != 200 || !strings.Contains(w.Body.String(), want) {
			t.Errorf("GET %s: %d, body without %q", path, w.Code, want)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' https://helper.example:8443;") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
	}
	var c webapp.Collection
	if err := json.Unmarshal(get("/dap-collection.json").Body.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	if want := []webapp.DAPItem{{ID: "a", Title: "Alien"}, {ID: "b"}}; !slices.Equal(c.Items, want) || c.Scale != [2]float64{1, 5} {
		t.Errorf("collection %+v", c)
	}
	if w := get("/app.js"); w.Code != 404 {
		t.Errorf("the two-aggregator handler serves the local-mode page's app.js (%d)", w.Code)
	}
	for _, bad := range []string{"", "ftp://h", "http://", "https://u:p@h", "helper:8091"} {
		if _, err := webapp.NewDAP(webapp.DAPOptions{HelperURL: bad}); err == nil {
			t.Errorf("helper URL %q accepted", bad)
		}
	}
	if _, err := webapp.NewDAP(webapp.DAPOptions{HelperURL: "http://h", Scale: [2]float64{5, 1}}); err == nil {
		t.Error("scale 5–1 accepted")
	}
}
