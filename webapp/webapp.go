// Package webapp is the browser client of `privrec serve`, embedded in the
// binary and served at / (docs/BROWSER.md). A person joins, rates items of
// the catalogue, sees exactly what will leave her device and what it
// costs against her budget, sends it, and sees her own recommendations
// computed in the browser from the latest public release and her own
// ratings (predicted ratings, or a ranking for a top-N model, with the
// release's warnings when its noise drowns it). Every text is the
// collection's mode's own: in local mode the report is randomized on the
// device and her true ratings stay in the browser's localStorage; in
// central mode the page says plainly that her ratings go to the operator
// as she entered them, and what the operator publishes.
//
// The device code is package client compiled to WebAssembly (command
// webapp/wasm): the same randomization as `privrec collect` and the
// reference client, its noise keyed from Go's crypto/rand, which under
// js/wasm reads the browser's crypto.getRandomValues. The module is
// committed gzip-compressed (static/privrec.wasm.gz, with the Go version
// that built it in static/privrec.wasm.version), so that a fresh clone
// builds without a WebAssembly step; `go generate ./webapp` rebuilds it
// reproducibly, and a test fails when it is stale.
//
// NewDAP serves the device of the two-aggregator path instead (dap.html,
// from `privrec serve --role leader`): the module's package dap code
// computes her contribution to each task, shards it and seals one share
// to each aggregator's key (the helper's fetched from the helper), the
// page uploads it once per task to the leader, keeps her own ρ ledger and
// computes her recommendations from the published release.
//
// Every answer carries a Content-Security-Policy that lets the page load
// and connect to this server only (plus 'wasm-unsafe-eval' to compile the
// module): nothing is fetched from anywhere else.
package webapp

//go:generate go run ./internal/genwasm

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"
)

//go:embed static/index.html static/app.js static/dap.html static/dap.js static/common.js static/style.css static/wasm_exec.js static/privrec.wasm.gz static/privrec.wasm.version
var static embed.FS

// CSP is the Content-Security-Policy of every answer.
const CSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; connect-src 'self'; img-src 'self'; style-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type file struct {
	name  string // for ServeContent's type detection
	ctype string
	body  []byte
	etag  string
}

// Handler serves the web app: / (index.html), app.js, style.css,
// wasm_exec.js and privrec.wasm (gzip-encoded when the browser accepts
// it). Other paths are 404; methods other than GET and HEAD are 405.
type Handler struct {
	csp   string
	files map[string]*file
	gz    *file // privrec.wasm, gzip-compressed

	rawOnce sync.Once
	raw     *file
	rawErr  error
}

// New returns the handler over the embedded files.
func New() (*Handler, error) {
	return newHandler(CSP, map[string]string{"/": "index.html", "/index.html": "index.html", "/app.js": "app.js"})
}

// ctypes are the content types of the page's files.
var ctypes = map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

// newHandler serves pages (path → file in static/) with the shared
// style, wasm_exec.js and module.
func newHandler(csp string, pages map[string]string) (*Handler, error) {
	h := &Handler{csp: csp, files: map[string]*file{}}
	pages["/style.css"], pages["/wasm_exec.js"], pages["/common.js"] = "style.css", "wasm_exec.js", "common.js"
	for path, name := range pages {
		b, err := fs.ReadFile(static, "static/"+name)
		if err != nil {
			return nil, fmt.Errorf("webapp: %w", err)
		}
		h.files[path] = &file{name: name, ctype: ctypes[name[strings.LastIndexByte(name, '.'):]], body: b, etag: etag(b)}
	}
	gz, err := fs.ReadFile(static, "static/privrec.wasm.gz")
	if err != nil {
		return nil, fmt.Errorf("webapp: %w", err)
	}
	h.gz = &file{name: "privrec.wasm", ctype: "application/wasm", body: gz, etag: etag(gz)}
	return h, nil
}

func etag(b []byte) string {
	s := sha256.Sum256(b)
	return `"` + hex.EncodeToString(s[:12]) + `"`
}

// WASM returns the uncompressed module (decompressed once).
func (h *Handler) WASM() ([]byte, error) {
	f, err := h.rawWASM()
	if err != nil {
		return nil, err
	}
	return f.body, nil
}

func (h *Handler) rawWASM() (*file, error) {
	h.rawOnce.Do(func() {
		zr, err := gzip.NewReader(bytes.NewReader(h.gz.body))
		if err != nil {
			h.rawErr = fmt.Errorf("webapp: privrec.wasm.gz: %w", err)
			return
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			h.rawErr = fmt.Errorf("webapp: privrec.wasm.gz: %w", err)
			return
		}
		h.raw = &file{name: "privrec.wasm", ctype: "application/wasm", body: b, etag: etag(b)}
	})
	return h.raw, h.rawErr
}

// CompressedWASM returns the module as embedded (gzip).
func (h *Handler) CompressedWASM() []byte { return h.gz.body }

// acceptsGzip reports whether the request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", h.csp)
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	f, ok := h.files[r.URL.Path]
	if r.URL.Path == "/privrec.wasm" {
		ok = true
		hd.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			f = h.gz
			hd.Set("Content-Encoding", "gzip")
		} else {
			var err error
			if f, err = h.rawWASM(); err != nil {
				http.Error(w, "the embedded module is damaged", http.StatusInternalServerError)
				return
			}
		}
	}
	if !ok {
		http.Error(w, "404 page not found (the API is under /v1/)", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hd.Set("Content-Type", f.ctype)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", f.etag)
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
}
