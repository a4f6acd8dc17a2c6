package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/privrec/privrec/ratings"
	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

// A --data value naming a `privrec serve` database (sqlite:FILE,
// postgres://…) is read through the store: dataFlags.read calls
// readStore for it, and train takes in.Source = d.path after the read.
//
// In local mode the data are the stored reports, one row per report
// ("r<seq>", its randomized values over the catalogue); they are also
// written as a `privrec collect` file — FILE.collect.tsv beside an SQLite
// database, or privrec-<hash of the URL>.collect.tsv in the temporary
// directory for PostgreSQL, rewritten each time — and d.path becomes that
// file, whose header the ldp-* methods read (mechanism, ε, declared
// scale, population = the number of reports, the mean report's ε), with
// one "#mean" line per report when the collection takes mean reports. In central mode the data
// are each user's latest true ratings (rows named by user ID).
//
// Training offline reads the data outside the server's ledger: in local
// mode that is post-processing of the reports (free); in central mode it
// is the curator's own act — publish through POST /v1/admin/releases to
// have a release charged.
func (d *dataFlags) readStore() (*ratings.Matrix, error) {
	ctx := context.Background()
	st, err := store.Open(ctx, d.path)
	if err != nil {
		return nil, fmt.Errorf("--data: %w", err)
	}
	defer st.Close()
	cfg, err := service.StoredConfig(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("--data %s: %w", store.Redact(d.path), err)
	}
	if cfg.Mode == api.ModeCentral {
		m, _, _, err := service.RatingsMatrix(ctx, st, cfg)
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, fmt.Errorf("--data %s holds no ratings yet", store.Redact(d.path))
		}
		return m, nil
	}
	reps, err := service.ReadLocalReports(ctx, st, cfg)
	if err != nil {
		return nil, err
	}
	m, n := reps.Matrix, reps.N
	if m == nil {
		return nil, fmt.Errorf("--data %s holds no reports with a present value yet", store.Redact(d.path))
	}
	path := collectPathFor(d.path)
	tmp := path + ".tmp"
	if err := service.WriteCollectFile(tmp, cfg, reps); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("writing the reports as a collect file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("writing the reports as a collect file: %w", err)
	}
	fmt.Fprintf(os.Stderr, "privrec: %d reports of %s written as the collect file %s\n", n, store.Redact(d.path), path)
	d.path = path
	return m, nil
}

// collectPathFor is where the reports of a database are exported.
func collectPathFor(url string) string {
	if p, ok := strings.CutPrefix(url, "sqlite:"); ok {
		return strings.TrimPrefix(p, "//") + ".collect.tsv"
	}
	h := sha256.Sum256([]byte(url))
	return filepath.Join(os.TempDir(), "privrec-"+hex.EncodeToString(h[:6])+".collect.tsv")
}
