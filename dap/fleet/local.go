package fleet

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"

	"github.com/privrec/privrec/dap"
	"github.com/privrec/privrec/dap/server"
	"github.com/privrec/privrec/privacy/noise"
)

// Pair is a leader and a helper running in this process (tests and
// quick experiments; the end-to-end experiment runs two privrec serve
// processes instead).
type Pair struct {
	LeaderURL, HelperURL string
	AdminToken           string
	LeaderDB, HelperDB   string
	close                []func() error
}

// Close stops both aggregators.
func (p *Pair) Close() error {
	var errs []error
	for i := len(p.close) - 1; i >= 0; i-- {
		errs = append(errs, p.close[i]())
	}
	return errors.Join(errs...)
}

// StartPair starts two aggregators on loopback with their databases in
// dir, fresh keys and secrets, per-user budget budgetRho, and noise from
// seeded sources when seeds are given (leader, helper), else crypto/rand.
func StartPair(ctx context.Context, dir string, budgetRho float64, seeds ...uint64) (*Pair, error) {
	secret := make([]byte, 32)
	tok := make([]byte, 24)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	p := &Pair{AdminToken: "admin-" + base64.RawURLEncoding.EncodeToString(tok), LeaderDB: filepath.Join(dir, "leader.db"), HelperDB: filepath.Join(dir, "helper.db")}
	peer := "peer-" + base64.RawURLEncoding.EncodeToString(tok[:12])
	start := func(role dap.Role, db, helperURL string) (string, error) {
		key, err := dap.NewKeyPair()
		if err != nil {
			return "", err
		}
		// MinBatch 1: tests and experiments release small batches; a
		// deployed helper keeps its own floor (privrec serve --min-batch).
		cfg := server.Config{Role: role, DB: db, Key: key, Secret: secret, AggregatorToken: peer,
			AdminToken: p.AdminToken, HelperURL: helperURL, BudgetRho: budgetRho, MinBatch: 1}
		if len(seeds) == 2 {
			cfg.Noise = noise.Seeded(seeds[role])
		}
		s, err := server.New(ctx, cfg)
		if err != nil {
			return "", err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.Close()
			return "", fmt.Errorf("fleet: %w", err)
		}
		hs := &http.Server{Handler: s.Handler()}
		go hs.Serve(ln)
		p.close = append(p.close, s.Close, hs.Close)
		return "http://" + ln.Addr().String(), nil
	}
	var err error
	if p.HelperURL, err = start(dap.Helper, p.HelperDB, ""); err != nil {
		p.Close()
		return nil, err
	}
	if p.LeaderURL, err = start(dap.Leader, p.LeaderDB, p.HelperURL); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}
