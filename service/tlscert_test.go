package service_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/privrec/privrec/service"
)

// certPEM makes a self-signed certificate named cn and its key, as PEM.
func certPEM(t *testing.T, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// servedName dials a TLS listener and returns the common name of the
// certificate it presents.
func servedName(t *testing.T, addr string) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the test checks the name itself
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestCertReload: the certificate is replaced without a restart — by
// Reload (SIGHUP in privrec serve), by Watch on a signal and by Watch
// seeing the files change — while a pair that does not load (garbage, a
// key of another certificate, a renewal half written) is refused and
// the certificate served before stays.
func TestCertReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca, ka := certPEM(t, "a")
	writeFile(t, certFile, ca)
	writeFile(t, keyFile, ka)
	if _, err := service.LoadCertFiles(certFile, filepath.Join(dir, "missing.pem")); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("a missing key: %v, want an error naming it", err)
	}
	certs, err := service.LoadCertFiles(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", certs.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	if got := servedName(t, addr); got != "a" {
		t.Fatalf("served %q, want a", got)
	}

	cb, kb := certPEM(t, "b")
	writeFile(t, certFile, cb)
	writeFile(t, keyFile, kb)
	if changed, err := certs.Reload(); err != nil || !changed {
		t.Fatalf("Reload: changed %v, %v", changed, err)
	}
	if got := servedName(t, addr); got != "b" {
		t.Fatalf("after Reload served %q, want b", got)
	}
	if changed, err := certs.Reload(); err != nil || changed {
		t.Fatalf("Reload of the same files: changed %v, %v", changed, err)
	}

	cc, _ := certPEM(t, "c")
	for _, bad := range []struct {
		name       string
		cert, key  []byte
		wantInText string
	}{
		{"garbage key", cb, []byte("not a key"), "key.pem"},
		{"key of another certificate", cc, kb, "private key does not match"},
		{"empty certificate", nil, kb, "cert.pem"},
	} {
		writeFile(t, certFile, bad.cert)
		writeFile(t, keyFile, bad.key)
		_, err := certs.Reload()
		if err == nil || !strings.Contains(err.Error(), bad.wantInText) || !strings.Contains(err.Error(), "stays") {
			t.Fatalf("%s: Reload error %v, want one with %q saying the old certificate stays", bad.name, err, bad.wantInText)
		}
		if got := servedName(t, addr); got != "b" {
			t.Fatalf("%s: served %q, want b (kept)", bad.name, got)
		}
	}

	// Watch: a signal reloads at once; a change of the files is seen by
	// the poll; a half-written renewal (certificate first) is not served
	// until its key arrives.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		certs.Watch(ctx, 20*time.Millisecond, sig, nil)
	}()
	wait := func(want string) {
		t.Helper()
		for start := time.Now(); servedName(t, addr) != want; time.Sleep(10 * time.Millisecond) {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("still serving %q, want %q", servedName(t, addr), want)
			}
		}
	}
	cd, kd := certPEM(t, "d")
	writeFile(t, certFile, cd)
	writeFile(t, keyFile, kd)
	wait("d")
	ce, ke := certPEM(t, "e")
	writeFile(t, certFile, ce)
	time.Sleep(200 * time.Millisecond) // ten polls see the new certificate with the old key
	if got := servedName(t, addr); got != "d" {
		t.Fatalf("half-written renewal: served %q, want d", got)
	}
	writeFile(t, keyFile, ke)
	wait("e")
	cancel()
	<-done
	// Without polling, only the signal reloads.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go certs.Watch(ctx, 0, sig, nil)
	cf, kf := certPEM(t, "f")
	writeFile(t, certFile, cf)
	writeFile(t, keyFile, kf)
	sig <- os.Interrupt
	wait("f")
}
