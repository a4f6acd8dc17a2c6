// Package wasmbuild builds the browser client's WebAssembly module
// reproducibly, for `go generate ./webapp` and for the test that the
// committed module is not stale.
package wasmbuild

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Package is the import path of the module's main package.
const Package = "github.com/privrec/privrec/webapp/wasm"

// goTool is the go command of the running toolchain (or the one on PATH).
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// Build compiles the module (GOOS=js GOARCH=wasm, -trimpath,
// -buildvcs=false, -ldflags=-s -w, no cgo) and returns its bytes.
func Build(ctx context.Context) ([]byte, error) {
	dir, err := os.MkdirTemp("", "privrec-wasm-")
	if err != nil {
		return nil, fmt.Errorf("wasmbuild: %w", err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "privrec.wasm")
	cmd := exec.CommandContext(ctx, goTool(), "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, Package)
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("wasmbuild: go build %s: %w: %s", Package, err, strings.TrimSpace(stderr.String()))
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("wasmbuild: %w", err)
	}
	return b, nil
}

// GoVersion is the version of the go command that Build runs.
func GoVersion(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, goTool(), "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("wasmbuild: go env GOVERSION: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// GoLicense returns the toolchain's LICENSE, which wasm_exec.js's header
// refers to.
func GoLicense(ctx context.Context) ([]byte, error) {
	out, err := exec.CommandContext(ctx, goTool(), "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("wasmbuild: go env GOROOT: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "LICENSE"))
	if err != nil {
		return nil, fmt.Errorf("wasmbuild: the Go licence: %w", err)
	}
	return b, nil
}

// WasmExec returns the toolchain's wasm_exec.js (lib/wasm since Go 1.24).
func WasmExec(ctx context.Context) ([]byte, error) {
	out, err := exec.CommandContext(ctx, goTool(), "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("wasmbuild: go env GOROOT: %w", err)
	}
	root := strings.TrimSpace(string(out))
	b, err := os.ReadFile(filepath.Join(root, "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		b, err = os.ReadFile(filepath.Join(root, "misc", "wasm", "wasm_exec.js"))
	}
	if err != nil {
		return nil, fmt.Errorf("wasmbuild: wasm_exec.js: %w", err)
	}
	return b, nil
}

// Gzip compresses deterministically (best compression, no name or time
// in the header).
func Gzip(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, fmt.Errorf("wasmbuild: gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("wasmbuild: gzip: %w", err)
	}
	return buf.Bytes(), nil
}
