package service

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/netutil"
)

// Connection limits. A keep-alive connection costs a file descriptor and
// ≈ 18 KB; with no bound, idle clients can take every descriptor the
// process may open, and then the database cannot open its files (SQLite
// answered "unable to open database file" to every report with 1 100
// idle connections under ulimit -n 1024).
const (
	// FDReserve is how many file descriptors are kept for the database
	// (SQLite's file, WAL and shared memory per connection, or a
	// PostgreSQL pool), the log and the process itself: the connection
	// cap is RLIMIT_NOFILE minus this.
	FDReserve = 128
	// MaxConnsCeiling bounds the derived cap when the descriptor limit is
	// very high (memory, not descriptors, is then what runs out).
	MaxConnsCeiling = 16384
	// DefaultIdleTimeout is how long an idle keep-alive connection is
	// kept.
	DefaultIdleTimeout = 30 * time.Second
)

// ConnLimit derives the connection cap from the process's descriptor
// limit (RLIMIT_NOFILE, which the Go runtime raises to the hard limit
// at start): the soft limit minus FDReserve, at most MaxConnsCeiling. It
// refuses a limit too small to leave room for any connection.
func ConnLimit() (int, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	return connLimitFrom(lim.Cur)
}

func connLimitFrom(nofile uint64) (int, error) {
	if nofile < FDReserve+16 {
		return 0, fmt.Errorf("the file descriptor limit (ulimit -n) is %d: at least %d are needed (%d kept for the database); raise it", nofile, FDReserve+16, FDReserve)
	}
	return int(min(nofile-FDReserve, MaxConnsCeiling)), nil
}

// connGuard bounds the open connections and, when the bound is reached,
// closes the connection that has been idle longest (or silent since it
// was opened), so that a crowd of
// idle keep-alive clients cannot lock out one that has a report to send.
// netutil.LimitListener does the counting (a connection beyond the bound
// waits in the kernel's backlog, holding no descriptor of ours); the
// shedding is ours, as net/http offers no policy for it — only the
// ConnState hook, which is what observes idleness.
type connGuard struct {
	max  int
	mu   sync.Mutex
	open int
	idle map[net.Conn]time.Time
}

func newConnGuard(max int) *connGuard {
	return &connGuard{max: max, idle: map[net.Conn]time.Time{}}
}

// listener wraps ln with the bound.
func (g *connGuard) listener(ln net.Listener) net.Listener {
	return netutil.LimitListener(ln, g.max)
}

// state is the http.Server's ConnState hook.
func (g *connGuard) state(c net.Conn, st http.ConnState) {
	var shed net.Conn
	g.mu.Lock()
	switch st {
	case http.StateNew:
		g.open++
		if g.open >= g.max {
			// Full: make room for the next client by closing the
			// longest-idle connection (its client reconnects if it has
			// anything to send; nothing in flight is cut).
			var oldest time.Time
			for ic, t := range g.idle {
				if shed == nil || t.Before(oldest) {
					shed, oldest = ic, t
				}
			}
			delete(g.idle, shed)
		}
		// A new connection that has sent nothing yet is as idle as a
		// kept-alive one (until ReadHeaderTimeout closes it).
		g.idle[c] = time.Now()
	case http.StateIdle:
		g.idle[c] = time.Now()
	case http.StateActive:
		delete(g.idle, c)
	case http.StateClosed, http.StateHijacked:
		g.open--
		delete(g.idle, c)
	}
	g.mu.Unlock()
	if shed != nil {
		shed.Close()
	}
}

// badHTTPConn makes net/http's own answers to malformed HTTP uniform:
// for a request it cannot parse, net/http writes a canned plain-text
// response straight to the connection (505 for an unknown protocol
// version, 501 for an unknown Transfer-Encoding, 400 otherwise) without
// calling any handler, and offers no hook to change it. This wrapper
// recognises that canned response — a write of a status line followed
// at once by net/http's fixed error headers, with no Date header, which
// no handler's response lacks — and rewrites it to the
// API's JSON error, 400 where the request was malformed (431 for
// oversized headers stays 431). It sees plain HTTP only: over TLS the
// connection is the TLS layer's, and the canned answers stand.
type badHTTPConn struct{ net.Conn }

// cannedTail is what follows the status line of every canned error
// response of net/http (server.go: errorHeaders).
var cannedTail = []byte("\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n")

func (c *badHTTPConn) Write(b []byte) (int, error) {
	status, msg, ok := parseCanned(b)
	if !ok {
		return c.Conn.Write(b)
	}
	switch status {
	case http.StatusHTTPVersionNotSupported, http.StatusNotImplemented:
		status = http.StatusBadRequest
	}
	code := "malformed_http"
	if status == http.StatusRequestHeaderFieldsTooLarge {
		code = "too_large"
	}
	body := fmt.Sprintf(`{"status":%d,"code":%q,"error":%s}`+"\n", status, code, strconv.Quote("malformed HTTP request: "+msg))
	resp := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	if _, err := c.Conn.Write([]byte(resp)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// parseCanned recognises net/http's canned error response.
func parseCanned(b []byte) (status int, msg string, ok bool) {
	rest, found := bytes.CutPrefix(b, []byte("HTTP/1.1 "))
	if !found || len(rest) < 4 || rest[3] != ' ' {
		return 0, "", false
	}
	status, err := strconv.Atoi(string(rest[:3]))
	if err != nil || status < 400 {
		return 0, "", false
	}
	i := bytes.Index(rest, cannedTail)
	if i < 0 || bytes.IndexByte(rest[:i], '\n') >= 0 {
		return 0, "", false
	}
	body := string(rest[i+len(cannedTail):])
	// The body is "<status text>" or "<status text>: <reason>".
	if _, reason, cut := bytes.Cut([]byte(body), []byte(": ")); cut {
		return status, string(reason), true
	}
	return status, body, true
}

type badHTTPListener struct{ net.Listener }

func (l badHTTPListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &badHTTPConn{Conn: c}, nil
}

// guardListener puts the connection bound (max; 0: ConnLimit), the
// shedding of idle connections, TLS (when configured) and the rewriting
// of net/http's malformed-request answers (plain HTTP) around ln.
func guardListener(ln net.Listener, max int, tlsCfg *tls.Config) (net.Listener, *connGuard, error) {
	n := max
	if n <= 0 {
		var err error
		if n, err = ConnLimit(); err != nil {
			return nil, nil, err
		}
	}
	g := newConnGuard(n)
	ln = g.listener(ln)
	if tlsCfg != nil {
		return tls.NewListener(ln, tlsCfg), g, nil
	}
	return badHTTPListener{ln}, g, nil
}
