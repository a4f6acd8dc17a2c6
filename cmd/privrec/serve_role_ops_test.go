package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRoleStartupChecks: an aggregator's database is made once with
// --create; a start without it is refused, naming what is wrong, for a
// missing or empty file, a damaged one, the other role's database or one
// made with another key or secret; --create over an existing database is
// refused too. Nothing is created by a refused start.
func TestRoleStartupChecks(t *testing.T) {
	r := newDapRig(t)
	r.start("helper", "")
	r.kill("helper")
	helperDB := filepath.Join(r.dir, "helper.db")
	base := func(role, db, key string, extra ...string) []string {
		return append([]string{"serve", "--role", role, "--db", db, "--key-file", key, "--secret-file", r.secret,
			"--peer-token-file", r.peer, "--listen", "127.0.0.1:0", "--log-level", "error"}, extra...)
	}
	empty := filepath.Join(r.dir, "empty.db")
	must(t, os.WriteFile(empty, nil, 0o644))
	damaged := filepath.Join(r.dir, "damaged.db")
	b, err := os.ReadFile(helperDB)
	must(t, err)
	for i := 100; i < len(b) && i < 8192; i++ {
		b[i] ^= 0x5a
	}
	must(t, os.WriteFile(damaged, b, 0o644))
	otherSecret := filepath.Join(r.dir, "other.secret")
	s, _ := newSecret()
	must(t, os.WriteFile(otherSecret, []byte(s), 0o600))
	leaderArgs := []string{"--admin-token-file", r.admin, "--helper", "http://127.0.0.1:1", "--budget-rho", "1"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a missing database", base("helper", filepath.Join(r.dir, "typo.db"), filepath.Join(r.dir, "helper.key")), "--create"},
		{"an empty file", base("helper", empty, filepath.Join(r.dir, "helper.key")), "empty file"},
		{"a damaged file", base("helper", damaged, filepath.Join(r.dir, "helper.key")), "integrity"},
		{"--create over a database", base("helper", helperDB, filepath.Join(r.dir, "helper.key"), "--create"), "exists"},
		{"the helper's database as a leader's", base("leader", helperDB, filepath.Join(r.dir, "helper.key"), leaderArgs...), "role"},
		{"another HPKE key", base("helper", helperDB, filepath.Join(r.dir, "new.key")), "hpke_key"},
		{"another secret", append(base("helper", helperDB, filepath.Join(r.dir, "helper.key")), "--secret-file", otherSecret), "secret"},
		{"a malformed --helper", base("leader", filepath.Join(r.dir, "l.db"), filepath.Join(r.dir, "l.key"), "--create", "--admin-token-file", r.admin, "--helper", "127.0.0.1:8091", "--budget-rho", "1"), "--helper"},
	} {
		_, errs, code := runCLI(t, tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, %q; want a refusal naming %q", tc.name, code, errs, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, "typo.db")); err == nil {
		t.Error("a refused start created the mistyped database")
	}
	// The right settings still open it.
	r.start("helper", "")
	if code, _, _ := r.call(http.MethodGet, r.url("helper")+"/readyz", "", nil); code != http.StatusOK {
		t.Errorf("/readyz of a healthy helper: HTTP %d", code)
	}
}

// TestRoleConfigTLS: a helper started from a --config file with TLS
// serves HTTPS (/livez, /readyz, its HPKE key); a leader reaches it over
// HTTPS with the helper's CA (--helper-ca) and provisions a task there.
func TestRoleConfigTLS(t *testing.T) {
	r := newDapRig(t)
	certFile, keyFile, pool := selfSigned(t, r.dir)
	conf := filepath.Join(r.dir, "helper.conf")
	must(t, os.WriteFile(conf, []byte(strings.Join([]string{
		"# the helper's settings",
		"tls-cert = " + certFile,
		"tls-key = " + keyFile,
		"max-conns = 64",
		"idle-timeout = 10s",
		"min-batch = 1",
	}, "\n")+"\n"), 0o644))
	r.extra["helper"] = []string{"--config", conf}
	r.extra["leader"] = []string{"--helper", strings.Replace(r.url("helper"), "http:", "https:", 1), "--helper-ca", certFile}
	startTLS(t, r, "helper", pool)
	r.start("leader", "")
	task := r.createTask(exactTask(t, "tls", 3))
	if task.ID != "tls" {
		t.Fatalf("task created over HTTPS: %+v", task)
	}
}

// startTLS starts a process that serves HTTPS and waits for its /livez.
func startTLS(t *testing.T, r *dapRig, name string, pool *x509.CertPool) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	r.livez = func(url string) (*http.Response, error) {
		return hc.Get(strings.Replace(url, "http:", "https:", 1))
	}
	defer func() { r.livez = nil }()
	r.start(name, "")
	resp, err := hc.Get(strings.Replace(r.url(name), "http:", "https:", 1) + "/readyz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz over HTTPS: %v %v", resp, err)
	}
	resp.Body.Close()
}
