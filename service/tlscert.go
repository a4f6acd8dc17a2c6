package service

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// CertFiles serves a TLS certificate from a PEM certificate (chain) file
// and its key file, and reloads them without a restart: Reload on
// request (privrec serve calls it on SIGHUP), and Watch whenever either
// file changes (a renewal by certbot, cert-manager, …). A pair that does
// not load — unreadable, not PEM, a key that does not match the
// certificate, a half-written renewal — is refused and the certificate
// already served stays; connections open at a reload keep theirs, new
// handshakes get the new one (tls.Config.GetCertificate).
type CertFiles struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
	mu                sync.Mutex
	// loaded is the files' state at the last successful load; failed,
	// the state a load last failed on (not retried until it changes).
	loaded, failed fileState
}

// fileState identifies the contents of the two files cheaply: their
// sizes and modification times (os.Stat follows symlinks, so a renewal
// that repoints one is seen).
type fileState struct {
	certMod, keyMod   time.Time
	certSize, keySize int64
}

// LoadCertFiles loads a certificate and its key; an error names the files.
func LoadCertFiles(certFile, keyFile string) (*CertFiles, error) {
	c := &CertFiles{certFile: certFile, keyFile: keyFile}
	if _, err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// TLSConfig is a server configuration serving the current certificate.
func (c *CertFiles) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: c.GetCertificate, MinVersion: tls.VersionTLS12}
}

// GetCertificate returns the certificate currently served.
func (c *CertFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cur.Load(), nil
}

// Certificate is the certificate currently served.
func (c *CertFiles) Certificate() *tls.Certificate { return c.cur.Load() }

func (c *CertFiles) stat() (fileState, error) {
	cs, err := os.Stat(c.certFile)
	if err != nil {
		return fileState{}, fmt.Errorf("TLS certificate %s: %w", c.certFile, err)
	}
	ks, err := os.Stat(c.keyFile)
	if err != nil {
		return fileState{}, fmt.Errorf("TLS key %s: %w", c.keyFile, err)
	}
	return fileState{certMod: cs.ModTime(), keyMod: ks.ModTime(), certSize: cs.Size(), keySize: ks.Size()}, nil
}

// Reload reads both files and serves their certificate from the next
// handshake on. On an error nothing changes. changed says whether the
// certificate differs from the one served before.
func (c *CertFiles) Reload() (changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.stat()
	if err != nil {
		return false, err
	}
	return c.load(st)
}

func (c *CertFiles) load(st fileState) (bool, error) {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		c.failed = st
		return false, fmt.Errorf("TLS certificate %s, key %s: %w (the certificate served so far stays)", c.certFile, c.keyFile, err)
	}
	old := c.cur.Swap(&cert)
	c.loaded, c.failed = st, fileState{}
	return old == nil || !sameChain(old, &cert), nil
}

func sameChain(a, b *tls.Certificate) bool {
	if len(a.Certificate) != len(b.Certificate) {
		return false
	}
	for k := range a.Certificate {
		if string(a.Certificate[k]) != string(b.Certificate[k]) {
			return false
		}
	}
	return true
}

// reloadIfChanged reloads when either file differs from the last load
// (and from the last failed attempt).
func (c *CertFiles) reloadIfChanged() (tried, changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.stat()
	if err != nil {
		if c.failed.certSize == -1 {
			return false, false, nil // reported already
		}
		c.failed = fileState{certSize: -1}
		return true, false, err
	}
	if st == c.loaded || st == c.failed {
		return false, false, nil
	}
	changed, err = c.load(st)
	return true, changed, err
}

// Watch reloads the certificate when a value arrives on reload (SIGHUP)
// and when the files change (checked every every; 0: only on reload),
// until ctx ends. It logs each reload (the new certificate's subject and
// expiry) and each refused one.
func (c *CertFiles) Watch(ctx context.Context, every time.Duration, reload <-chan os.Signal, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tick <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	report := func(why string, changed bool, err error) {
		switch {
		case err != nil:
			log.Error("TLS certificate not reloaded", "why", why, "err", err)
		case changed:
			leaf := c.Certificate().Leaf
			attrs := []any{"why", why, "cert", c.certFile}
			if leaf != nil {
				attrs = append(attrs, "subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
			}
			log.Info("TLS certificate reloaded", attrs...)
		default:
			log.Info("TLS certificate reloaded, unchanged", "why", why, "cert", c.certFile)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
			changed, err := c.Reload()
			report("signal", changed, err)
		case <-tick:
			if tried, changed, err := c.reloadIfChanged(); tried {
				report("files changed", changed, err)
			}
		}
	}
}
