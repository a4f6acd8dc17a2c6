package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/privrec/privrec/service"
)

// serveHTTP are the flags of `privrec serve` about the HTTP side: the
// configuration file, TLS and connection limits.
type serveHTTP struct {
	config      *string
	tlsCert     *string
	tlsKey      *string
	maxConns    *int
	idleTimeout *time.Duration
	// certs serves and reloads the TLS certificate (nil: plain HTTP).
	certs *service.CertFiles
}

// tlsWatchEvery is how often serve looks at the TLS files for a renewal
// (SIGHUP reloads at once).
const tlsWatchEvery = 30 * time.Second

func addServeHTTPFlags(fs *flag.FlagSet) *serveHTTP {
	return &serveHTTP{
		config:  fs.String("config", "", "read settings from FILE: one flag per line as NAME = VALUE (the flags' names without --; # starts a comment); flags on the command line override it; an unknown name is an error naming the line"),
		tlsCert: fs.String("tls-cert", "", "serve HTTPS with this PEM certificate (chain) file; needs --tls-key (without both: plain HTTP, e.g. behind a TLS-terminating proxy). Reloaded without a restart on SIGHUP and when the files change (checked every 30s); a pair that does not load is refused and logged, and the certificate served so far stays"),
		tlsKey:  fs.String("tls-key", "", "the PEM private key of --tls-cert"),
		maxConns: fs.Int("max-conns", 0, fmt.Sprintf("most open HTTP connections; when reached, the longest-idle one is closed (0: the file descriptor limit, ulimit -n, minus %d kept for the database, at most %d)",
			service.FDReserve, service.MaxConnsCeiling)),
		idleTimeout: fs.Duration("idle-timeout", service.DefaultIdleTimeout, "how long an idle keep-alive connection is kept"),
	}
}

// loadConfigFile applies --config FILE to every flag the command line did
// not set. The file is NAME = VALUE lines rather than YAML or TOML so
// that each value goes through its flag's own parser (durations, scales
// and numbers read exactly as on the command line) and the file needs no
// schema of its own; a library would add a second syntax to document.
func (h *serveHTTP) loadConfigFile(fs *flag.FlagSet) error {
	path := *h.config
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return usagef("--config: %v", err)
	}
	defer f.Close()
	return applyConfig(fs, path, f)
}

// applyConfig applies the settings read from r (named path in errors).
func applyConfig(fs *flag.FlagSet, path string, r io.Reader) error {
	onCmdLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCmdLine[f.Name] = true })
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, value, ok := strings.Cut(text, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" {
			return usagef("%s:%d: %q is not NAME = VALUE", path, line, text)
		}
		name = strings.TrimLeft(name, "-")
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = value[1 : len(value)-1]
		}
		fl := fs.Lookup(name)
		switch {
		case fl == nil:
			return usagef("%s:%d: unknown setting %q (the names are serve's flags: privrec serve --help)", path, line, name)
		case name == "config":
			return usagef("%s:%d: a configuration file cannot name another (config)", path, line)
		case seen[name] > 0:
			return usagef("%s:%d: %s is set twice (first on line %d)", path, line, name, seen[name])
		}
		seen[name] = line
		if onCmdLine[name] {
			continue // the command line wins
		}
		if err := fs.Set(name, value); err != nil {
			return usagef("%s:%d: %s = %q: %v", path, line, name, value, err)
		}
	}
	if err := sc.Err(); err != nil {
		return usagef("--config %s: %v", path, err)
	}
	return nil
}

// apply puts TLS and the connection limits into the server's options.
func (h *serveHTTP) apply(opt *service.Options) error {
	opt.MaxConns, opt.IdleTimeout = *h.maxConns, *h.idleTimeout
	if *h.maxConns < 0 {
		return usagef("--max-conns must be ≥ 0, got %d", *h.maxConns)
	}
	if *h.idleTimeout <= 0 {
		return usagef("--idle-timeout must be positive, got %s", *h.idleTimeout)
	}
	if (*h.tlsCert == "") != (*h.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together (give both for HTTPS, neither for plain HTTP)")
	}
	if *h.tlsCert == "" {
		return nil
	}
	certs, err := service.LoadCertFiles(*h.tlsCert, *h.tlsKey)
	if err != nil {
		return usagef("--tls-cert, --tls-key: %v", err)
	}
	h.certs, opt.TLS = certs, certs.TLSConfig()
	return nil
}

// watchTLS reloads the TLS certificate on SIGHUP and when its files
// change, until ctx ends. Without TLS, SIGHUP is logged and otherwise
// ignored (rather than ending the process, its default).
func (h *serveHTTP) watchTLS(ctx context.Context, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		if h.certs != nil {
			h.certs.Watch(ctx, tlsWatchEvery, hup, log)
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: nothing to reload (no --tls-cert)")
			}
		}
	}()
}

// scheme is the URL scheme the server answers on.
func (h *serveHTTP) scheme() string {
	if *h.tlsCert != "" {
		return "https"
	}
	return "http"
}
