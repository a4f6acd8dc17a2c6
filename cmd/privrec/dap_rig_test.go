package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cloudflare/circl/kem"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/server"
	"github.com/privrec/privrec/privacy/mechanism"
	"github.com/privrec/privrec/statistic"
)

// dapRig runs a helper and a leader (and, when asked, a second leader
// process on the leader's database) as real privrec processes: this test
// binary run as privrec (TestMain, envAsPrivrec). Each keeps its port
// across restarts, so a restarted process is found where it was.
type dapRig struct {
	t                   testing.TB
	dir                 string
	secret, peer, admin string // files
	adminToken          string
	ports               map[string]int
	procs               map[string]*rigProc
	created             map[string]bool
	extra               map[string][]string // flags of every start of a process
	hc                  *http.Client
	// livez, when set, is how start asks a process whether it is up
	// (HTTPS).
	livez func(url string) (*http.Response, error)
}

type rigProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func newDapRig(t testing.TB) *dapRig {
	t.Helper()
	dir := t.TempDir()
	r := &dapRig{t: t, dir: dir, ports: map[string]int{}, procs: map[string]*rigProc{}, created: map[string]bool{},
		extra: map[string][]string{}, hc: &http.Client{Timeout: 60 * time.Second}}
	for _, f := range []struct {
		path *string
		name string
	}{{&r.secret, "secret"}, {&r.peer, "peer.token"}, {&r.admin, "admin.token"}} {
		s, err := newSecret()
		if err != nil {
			t.Fatal(err)
		}
		*f.path = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.path, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if f.name == "admin.token" {
			r.adminToken = s
		}
	}
	for _, name := range []string{"helper", "leader", "leader2"} {
		r.ports[name] = freePort(t)
	}
	t.Cleanup(func() {
		for name := range r.procs {
			r.kill(name)
		}
	})
	return r
}

// rigPorts hands out the ports of the processes tests start. A rig's process starts (and a
// restarted one binds again) well after its port was chosen, so a port
// the kernel assigned for "127.0.0.1:0" and released could meanwhile go
// to a test server of this or another package, which then answered the
// rig's /livez (and 404 to its API). The rigs' ports come from below the
// kernel's ephemeral range instead (32768 and up on Linux), in a window
// per process, each handed out once.
var rigPorts struct {
	sync.Mutex
	next int
}

// freePort returns a TCP port free on 127.0.0.1 a moment ago, for a
// process that binds it later (rigPorts).
func freePort(t testing.TB) int {
	t.Helper()
	rigPorts.Lock()
	defer rigPorts.Unlock()
	const lo, hi = 20000, 32000
	if rigPorts.next == 0 {
		rigPorts.next = lo + (os.Getpid()*97)%(hi-lo)
	}
	for range hi - lo {
		p := rigPorts.next
		if rigPorts.next++; rigPorts.next >= hi {
			rigPorts.next = lo
		}
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatal("no free port for the aggregators below the ephemeral range")
	return 0
}

func (r *dapRig) url(name string) string { return fmt.Sprintf("http://127.0.0.1:%d", r.ports[name]) }

// start starts a process (helper, leader or leader2) with crash as its
// fault-injection step ("" none) and waits until it answers /livez.
func (r *dapRig) start(name, crash string, extra ...string) {
	r.t.Helper()
	role := strings.TrimSuffix(name, "2")
	args := []string{"serve", "--role", role, "--db", filepath.Join(r.dir, role+".db"), "--key-file", filepath.Join(r.dir, role+".key"),
		"--secret-file", r.secret, "--peer-token-file", r.peer, "--listen", fmt.Sprintf("127.0.0.1:%d", r.ports[name]),
		"--log-level", "warn", "--log-format", "text", "--batch", "4"}
	if role == "helper" {
		args = append(args, "--min-batch", "1")
	}
	if role == "leader" {
		args = append(args, "--admin-token-file", r.admin, "--helper", r.url("helper"), "--budget-rho", "1e9", "--web=false",
			"--lock-ttl", "600ms", "--helper-timeout", "2s")
	}
	if !r.created[role] {
		args = append(args, "--create")
		r.created[role] = true
	}
	args = append(append(args, r.extra[name]...), extra...)
	exe, err := os.Executable()
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), envAsPrivrec+"=1", envCrash+"="+crash)
	if prof := os.Getenv("PRIVREC_CPUPROFILE"); prof != "" {
		cmd.Env = append(cmd.Env, "PRIVREC_CPUPROFILE="+prof+"."+name) // one profile per process
	}
	logf, err := os.OpenFile(filepath.Join(r.dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	p := &rigProc{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	r.procs[name] = p
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case <-p.done:
			r.t.Fatalf("%s exited at start: %s", name, r.log(name))
		default:
		}
		get := http.Get
		if r.livez != nil {
			get = r.livez
		}
		if resp, err := get(r.url(name) + "/livez"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	r.t.Fatalf("%s did not start within 30 s: %s", name, r.log(name))
}

func (r *dapRig) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(r.dir, name+".log"))
	return string(b)
}

func (r *dapRig) alive(name string) bool {
	p, ok := r.procs[name]
	if !ok {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL (kill -9) and waits for the process to end.
func (r *dapRig) kill(name string) {
	if p, ok := r.procs[name]; ok {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		delete(r.procs, name)
	}
}

// stop sends SIGTERM (a graceful shutdown: a CPU profile is written)
// and waits for the process to end.
func (r *dapRig) stop(name string) {
	if p, ok := r.procs[name]; ok {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.done
		delete(r.procs, name)
	}
}

// revive restarts, without a fault, every process that died; it
// reports whether any had.
func (r *dapRig) revive() bool {
	any := false
	for _, name := range []string{"helper", "leader", "leader2"} {
		if p, ok := r.procs[name]; ok && !r.alive(name) {
			<-p.done
			delete(r.procs, name)
			r.start(name, "")
			any = true
		}
	}
	return any
}

// call sends one JSON request; it returns the status (0: no answer) and
// the body.
func (r *dapRig) call(method, url, token string, in any) (int, []byte, http.Header) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			r.t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		r.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, []byte(err.Error()), nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// exactTask is a counts task over n items whose release reads each
// item's count off exactly: each device rates one item (weight 255/256
// at step 2⁻⁸), and the noise is σ = 2 lattice units per aggregator
// (release SD ≈ 0.011, against a step of 0.996 between counts).
func exactTask(t *testing.T, id string, n int) dap.Task {
	t.Helper()
	cat := make([]string, n)
	for i := range cat {
		cat[i] = fmt.Sprint("i", i)
	}
	c := &statistic.Counts{Items: n}
	mech, err := mechanism.NewGaussianSigma(1.0/128, 1e-6, c.Spec().Sensitivity, n)
	if err != nil {
		t.Fatal(err)
	}
	task, err := dap.Lattice{StepBits: 8}.TaskFor(id, statistic.RowPlan{Catalogue: cat}, c, mech)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// device is one simulated device: her token and her report (device i
// counts item i once).
type device struct {
	token  string
	report []byte
	acked  bool
	repeat bool // an upload was acknowledged as repeated
}

// createTask creates task at the leader (retrying through faults).
func (r *dapRig) createTask(task dap.Task) dap.Task {
	r.t.Helper()
	var out dap.Task
	r.retry("create task", func() (int, []byte) {
		code, b, _ := r.call(http.MethodPost, r.url("leader")+"/dap/v1/admin/tasks", r.adminToken, task)
		return code, b
	}, http.StatusCreated, &out)
	return out
}

// keys fetches the leader's and the helper's public keys, as a device does.
func (r *dapRig) keys() (leader, helper kem.PublicKey) {
	r.t.Helper()
	c := &dap.Client{Leader: r.url("leader"), Helper: r.url("helper")}
	ctx := context.Background()
	leader, err := c.PublicKey(ctx, r.url("leader"))
	if err != nil {
		r.t.Fatal(err)
	}
	if helper, err = c.PublicKey(ctx, r.url("helper")); err != nil {
		r.t.Fatal(err)
	}
	return leader, helper
}

// enrol enrols one device at the leader, retrying while it is down.
func (r *dapRig) enrol() server.Enrolment {
	r.t.Helper()
	var e server.Enrolment
	r.retry("enrol", func() (int, []byte) {
		code, b, _ := r.call(http.MethodPost, r.url("leader")+"/dap/v1/users", "", nil)
		return code, b
	}, http.StatusCreated, &e)
	return e
}

// devices enrols n devices and shards their reports for task.
func (r *dapRig) devices(task dap.Task, n int) []*device {
	r.t.Helper()
	lk, hk := r.keys()
	ds := make([]*device, n)
	for i := range ds {
		e := r.enrol()
		q := make([]int64, task.Dimension)
		q[i] = 255
		rep, err := task.Shard(q, lk, hk)
		if err != nil {
			r.t.Fatal(err)
		}
		b, err := server.EncodeReport(rep)
		if err != nil {
			r.t.Fatal(err)
		}
		ds[i] = &device{token: e.Token, report: b}
	}
	return ds
}

// upload sends device d's report to leader (by name) until it is
// acknowledged, reviving crashed processes in between; nothing but
// 201, or 200 for a repeat, is an acknowledgement.
func (r *dapRig) upload(leader string, task dap.Task, d *device) {
	r.t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		req, _ := http.NewRequest(http.MethodPut, r.url(leader)+"/dap/v1/tasks/"+task.ID+"/reports", bytes.NewReader(d.report))
		req.Header.Set("Authorization", "Bearer "+d.token)
		req.Header.Set("Content-Type", server.ReportMediaType)
		resp, err := r.hc.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusCreated:
				d.acked = true
				return
			case http.StatusOK:
				var rc server.Receipt
				if json.Unmarshal(b, &rc) != nil || !rc.Repeated {
					r.t.Fatalf("upload: 200 without a repeated receipt: %s", b)
				}
				d.acked, d.repeat = true, true
				return
			case http.StatusServiceUnavailable, http.StatusBadGateway:
			default:
				r.t.Fatalf("upload: HTTP %d: %s", resp.StatusCode, b)
			}
		}
		if !r.revive() {
			time.Sleep(100 * time.Millisecond)
		}
	}
	r.t.Fatal("upload: not acknowledged after 20 attempts")
}

// retry calls f until it answers want, reviving crashed processes in
// between; it decodes the answer into out.
func (r *dapRig) retry(what string, f func() (int, []byte), want int, out any) {
	r.t.Helper()
	var code int
	var b []byte
	for attempt := 0; attempt < 20; attempt++ {
		if code, b = f(); code == want {
			if out != nil {
				if err := json.Unmarshal(b, out); err != nil {
					r.t.Fatalf("%s: %v: %s", what, err, b)
				}
			}
			return
		}
		if code != 0 && code != http.StatusBadGateway && code != http.StatusServiceUnavailable {
			r.t.Fatalf("%s: HTTP %d: %s", what, code, b)
		}
		if !r.revive() {
			time.Sleep(200 * time.Millisecond)
		}
	}
	r.t.Fatalf("%s: HTTP %d after 20 attempts: %s\nleader: %s\nhelper: %s", what, code, b, r.log("leader"), r.log("helper"))
}

func (r *dapRig) aggregate(leader, taskID string) {
	r.retry("aggregate", func() (int, []byte) {
		code, b, _ := r.call(http.MethodPost, r.url(leader)+"/dap/v1/admin/tasks/"+taskID+"/aggregate", r.adminToken, nil)
		return code, b
	}, http.StatusOK, nil)
}

func (r *dapRig) collect(leader, taskID string) *server.Release {
	var rel server.Release
	r.retry("collect", func() (int, []byte) {
		code, b, _ := r.call(http.MethodPost, r.url(leader)+"/dap/v1/admin/tasks/"+taskID+"/collect", r.adminToken, nil)
		return code, b
	}, http.StatusOK, &rel)
	return &rel
}

// tally checks a release and the ledgers: each device counted exactly
// once (lost: counted 0 times; double: more), each charged ρ once.
func (r *dapRig) tally(rel *server.Release, task dap.Task, ds []*device) (lost, double int) {
	r.t.Helper()
	if len(rel.Values) != task.Dimension {
		r.t.Fatalf("release of %d values, want %d", len(rel.Values), task.Dimension)
	}
	for i, d := range ds {
		if !d.acked {
			r.t.Fatalf("device %d was never acknowledged", i)
		}
		n := int(rel.Values[i]*256/255 + 0.5*sign(rel.Values[i]))
		switch {
		case n < 1:
			lost++
		case n > 1:
			double++
		}
		var l server.Ledger
		code, b, _ := r.call(http.MethodGet, r.url("leader")+"/dap/v1/ledger", d.token, nil)
		if code != http.StatusOK || json.Unmarshal(b, &l) != nil {
			r.t.Fatalf("ledger of device %d: HTTP %d %s", i, code, b)
		}
		if want := float64(int64(task.Rho*1e9+0.999999)) / 1e9; l.SpentRho != want {
			r.t.Errorf("device %d: charged ρ %v, want %v once", i, l.SpentRho, want)
		}
	}
	return lost, double
}

func sign(x float64) float64 {
	if x < 0 {
		return -1
	}
	return 1
}
