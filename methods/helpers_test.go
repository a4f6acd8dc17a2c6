package methods

import (
	"context"
	"flag"
	"path/filepath"
	"testing"

	"github.com/privrec/privrec/privacy"
	"github.com/privrec/privrec/ratings"
)

// trainSaveEval runs one registered method end to end as the CLI does:
// its flags parsed from args, Train on train with c, the model saved to a
// file and evaluated on test from that file. It fails the test when the
// guarantee's status is not want.
func trainSaveEval(t *testing.T, name string, args []string, train, test *ratings.Matrix, c Common, want privacy.Status) *Report {
	t.Helper()
	m, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	tr := m.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	res, err := tr.Train(context.Background(), train, c)
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	if res.Guarantee.Status != want {
		t.Errorf("%s %v: status %s, want %s", name, args, res.Guarantee.Status, want)
	}
	path := filepath.Join(t.TempDir(), "m")
	if err := res.SaveTo(path); err != nil {
		t.Fatal(err)
	}
	rep, err := EvaluateFile(context.Background(), path, test, EvalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
