// Command genwasm rebuilds the browser client's embedded files (run by
// `go generate ./webapp` from the webapp directory): static/privrec.wasm.gz
// (the module, gzip-compressed), static/privrec.wasm.version (the Go
// version that built it and the SHA-256 of the uncompressed module) and
// static/wasm_exec.js (the toolchain's loader, licence header kept) with
// static/wasm_exec.LICENSE (the Go licence it refers to).
package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/privrec/privrec/webapp/internal/wasmbuild"
)

func main() {
	if err := run(context.Background(), "static"); err != nil {
		slog.Error("genwasm", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	raw, err := wasmbuild.Build(ctx)
	if err != nil {
		return err
	}
	gz, err := wasmbuild.Gzip(raw)
	if err != nil {
		return err
	}
	ver, err := wasmbuild.GoVersion(ctx)
	if err != nil {
		return err
	}
	js, err := wasmbuild.WasmExec(ctx)
	if err != nil {
		return err
	}
	lic, err := wasmbuild.GoLicense(ctx)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"wasm_exec.LICENSE":    lic,
		"privrec.wasm.gz":      gz,
		"privrec.wasm.version": fmt.Appendf(nil, "%s\nsha256 %x\nbytes %d\n", ver, sha256.Sum256(raw), len(raw)),
		"wasm_exec.js":         js,
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("genwasm: %w", err)
		}
	}
	fmt.Printf("genwasm: %s: %d bytes, %d gzip-compressed (%s)\n", filepath.Join(dir, "privrec.wasm.gz"), len(raw), len(gz), ver)
	return nil
}
