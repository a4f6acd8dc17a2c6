package service_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/privrec/privrec/service"
	"github.com/privrec/privrec/service/api"
	"github.com/privrec/privrec/service/store"
)

// TestBackupUnderLoad backs an SQLite collection up while 8 clients
// submit reports, restores the backup as a new database file (over a
// stale WAL, which the restore removes), opens it and checks it: every
// report acknowledged before the backup began is in it, nothing is in it
// that was not sent, and every ledger equals its reports' charges.
func TestBackupUnderLoad(t *testing.T) {
	ctx := context.Background()
	opt := localOptions(t, 8)
	opt.Epsilon, opt.Budget = 1, 1e6
	s := newTestServer(t, "sqlite", opt)
	type key struct{ user, id string }
	var mu sync.Mutex
	acked := map[key]bool{}
	sentIDs := map[key]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		c := s.client("")
		e, err := c.Enroll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				kk := key{e.User, fmt.Sprintf("g%d-%d", g, k)}
				mu.Lock()
				sentIDs[kk] = true
				mu.Unlock()
				if _, _, err := c.Submit(ctx, api.Report{ID: kk.id, Epsilon: 1, Values: make([]*float64, 8)}); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[kk] = true
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	before := make([]key, 0, len(acked))
	for k := range acked {
		before = append(before, k)
	}
	mu.Unlock()
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	start := time.Now()
	if err := s.st.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	time.Sleep(100 * time.Millisecond) // the load goes on after the backup
	close(stop)
	wg.Wait()
	if err := s.st.Backup(ctx, backup); err == nil {
		t.Fatal("a backup over an existing file was accepted")
	}
	restored := filepath.Join(dir, "restored.db")
	if err := os.WriteFile(restored+"-wal", []byte("a stale WAL of another database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := store.RestoreSQLite(ctx, backup, restored, false); err != nil {
		t.Fatal(err)
	}
	if err := store.RestoreSQLite(ctx, backup, restored, false); err == nil {
		t.Fatal("a restore over an existing database without replace was accepted")
	}
	r, err := store.Open(ctx, "sqlite:"+restored)
	if err != nil {
		t.Fatalf("opening the restored backup: %v", err)
	}
	defer r.Close()
	if err := r.Check(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range before {
		if _, err := r.Report(ctx, k.user, k.id); err != nil {
			t.Fatalf("report %v, acknowledged before the backup began, is not in it: %v", k, err)
		}
	}
	st, _ := r.Stats(ctx)
	live, _ := s.st.Stats(ctx)
	n := 0
	if _, err := r.ScanReports(ctx, 0, func(rep store.Report) error {
		if !sentIDs[key{rep.User, rep.ClientID}] {
			return fmt.Errorf("the backup holds report %s of %s, never sent", rep.ClientID, rep.User)
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if st.Users != 8 || st.Reports < int64(len(before)) || st.Reports >= live.Reports {
		t.Fatalf("backup %+v, %d acknowledged before it, live %+v", st, len(before), live)
	}
	// The service opens the restored collection with the same settings.
	srv, err := service.New(ctx, r, opt)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	t.Logf("backup under load in %s: %d reports (%d acknowledged before it began; %d in the live database at the end)", took, st.Reports, len(before), live.Reports)
}

// TestBackupPostgres: PostgreSQL is backed up with pg_dump; Backup says so.
func TestBackupPostgres(t *testing.T) {
	s := newTestServer(t, "postgres", localOptions(t, 4))
	if err := s.st.Backup(context.Background(), filepath.Join(t.TempDir(), "b")); !errors.Is(err, store.ErrBackupUnsupported) {
		t.Fatalf("Backup on PostgreSQL = %v, want ErrBackupUnsupported", err)
	}
}
