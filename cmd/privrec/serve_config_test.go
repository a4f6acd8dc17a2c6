package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestServeConfigFile(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, file string
		args       []string
		wantErr    string // "" for success
		db         string
		rate       float64
	}{
		{"values", "# a comment\ndb = sqlite:a.db\n\nrate = 7\n--grace = 3s\n", nil, "", "sqlite:a.db", 7},
		{"the command line wins", "db = sqlite:a.db\nrate = 7\n", []string{"--rate", "9"}, "", "sqlite:a.db", 9},
		{"quoted value", `db = "sqlite:b c.db"` + "\n", nil, "", "sqlite:b c.db", 50},
		{"unknown key", "db = sqlite:a.db\nrates = 7\n", nil, ":2: unknown setting \"rates\"", "", 0},
		{"bad value", "rate = fast\n", nil, ":1: rate = \"fast\"", "", 0},
		{"no equals sign", "\n\nrate 7\n", nil, ":3: \"rate 7\" is not NAME = VALUE", "", 0},
		{"twice", "rate = 1\nrate = 2\n", nil, ":2: rate is set twice (first on line 1)", "", 0},
		{"itself", "config = x\n", nil, ":1: a configuration file cannot name another", "", 0},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "c"+string(rune('a'+k))+".conf")
			must(t, os.WriteFile(path, []byte(c.file), 0o644))
			fs := newFlags("serve", "", "")
			db := fs.String("db", "", "")
			rate := fs.Float64("rate", 50, "")
			fs.Duration("grace", time.Second, "")
			h := addServeHTTPFlags(fs)
			must(t, parse(fs, append([]string{"--config", path}, c.args...), false))
			err := h.loadConfigFile(fs)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), path+c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, path+c.wantErr)
				}
				return
			}
			if err != nil || *db != c.db || *rate != c.rate {
				t.Fatalf("db %q rate %g, %v", *db, *rate, err)
			}
		})
	}
	// A file naming a flag of another command is refused by serve.
	path := filepath.Join(dir, "train.conf")
	must(t, os.WriteFile(path, []byte("epochs = 3\n"), 0o644))
	if code, _ := runCmd(t, "serve", "--config", path); code != 2 {
		t.Fatalf("serve with an unknown setting: exit %d, want 2", code)
	}
}

// selfSignedName is the common name selfSigned gives its certificate.
var selfSignedName = "privrec test"

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: selfSignedName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeTLSFromConfig: `privrec serve --config FILE` with every
// setting in the file, TLS among them, serves HTTPS with the generated
// certificate; plain HTTP to it is refused.
func TestServeTLSFromConfig(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	items := filepath.Join(dir, "items.txt")
	must(t, os.WriteFile(items, []byte("a\nb\nc\n"), 0o644))
	addrFile := filepath.Join(dir, "addr")
	conf := filepath.Join(dir, "privrec.conf")
	must(t, os.WriteFile(conf, []byte(strings.Join([]string{
		"# privrec serve settings",
		"db = sqlite:" + filepath.Join(dir, "serve.db"),
		"listen = 127.0.0.1:0", "items = " + items, "mechanism = rr", "scale = 1:5", "epsilon = 3", "budget = 9",
		"tls-cert = " + certFile, "tls-key = " + keyFile, "addr-file = " + addrFile, "log-level = warn", "web = false",
		"max-conns = 64", "idle-timeout = 5s",
	}, "\n")+"\n"), 0o644))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run(ctx, []string{"serve", "--config", conf, "--create"}, &out, &errb)
		if code != 0 {
			t.Logf("serve: %s", errb.String())
		}
		done <- code
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d", code)
		}
	}()
	var addr string
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(addrFile); err == nil {
			addr = strings.TrimSpace(string(b))
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the server did not start")
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get("https://" + addr + "/v1/config")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil || !bytes.Contains(b, []byte(`"mechanism":"rr"`)) {
		t.Fatalf("HTTPS: %d %s", resp.StatusCode, b)
	}
	// A renewed certificate in the same files is served after SIGHUP,
	// without a restart (serve registered for SIGHUP before writing
	// --addr-file, so the signal does not end the test process).
	selfSignedName = "privrec test renewed"
	defer func() { selfSignedName = "privrec test" }()
	_, _, pool2 := selfSigned(t, dir)
	must(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	hc2 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool2}}}
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		resp, err := hc2.Get("https://" + addr + "/v1/config")
		if err == nil {
			resp.Body.Close()
			if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != selfSignedName {
				t.Fatalf("after SIGHUP the server presents %q", cn)
			}
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the renewed certificate was not served after SIGHUP: %v", err)
		}
	}
	// Plain HTTP to the TLS port gets no API answer.
	resp, err = (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/v1/config")
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatalf("plain HTTP answered: %s", b)
		}
	}
}

// FuzzServeConfigFile: any file either applies or is refused with an
// error naming the file and a line; it never panics, and a line the
// command line also sets never changes that flag.
func FuzzServeConfigFile(f *testing.F) {
	for _, s := range []string{"db = sqlite:a.db\nrate = 7\n", "# c\n\n--grace = 3s", "rate 7", "x = 1", "rate = 1\nrate = 2", `db = "q"`, "config = y", "=\n", "rate = \x00"} {
		f.Add([]byte(s))
	}
	const path = "fuzz.conf"
	f.Fuzz(func(t *testing.T, b []byte) {
		fs := newFlags("serve", "", "")
		fs.String("db", "", "")
		rate := fs.Float64("rate", 50, "")
		fs.Duration("grace", time.Second, "")
		addServeHTTPFlags(fs)
		if err := parse(fs, []string{"--rate", "9"}, false); err != nil {
			t.Fatal(err)
		}
		err := applyConfig(fs, path, bytes.NewReader(b))
		if err != nil && !strings.Contains(err.Error(), path+":") {
			t.Fatalf("%q: error %v does not name the file", b, err)
		}
		if *rate != 9 {
			t.Fatalf("%q: the file overrode --rate on the command line (%g)", b, *rate)
		}
	})
}
