package experiment

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportOnlyAnotherMetric: rewriting the outputs in another metric
// (--report-only after changing "metric") leaves the first figures and
// report as they were and writes its own beside them.
func TestReportOnlyAnotherMetric(t *testing.T) {
	c := testConfig()
	dir := t.TempDir()
	runToDir(t, c, dir)
	first, err := os.ReadFile(filepath.Join(dir, "fig-toy.png"))
	if err != nil {
		t.Fatal(err)
	}
	firstReport, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	c.Metric = "mae"
	if err := WriteOutputs(c, dir); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "fig-toy.png")); !bytes.Equal(again, first) {
		t.Error("the rmse figure was overwritten by the mae report")
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "report.md")); !bytes.Equal(again, firstReport) {
		t.Error("report.md was overwritten by the mae report")
	}
	for _, f := range []string{"fig-toy-mae.png", "fig-toy-mae.svg", "report-mae.md"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing: %v", f, err)
		}
	}
	// The figure's axes: ε on a log₂ scale, the metric in words.
	svg, _ := os.ReadFile(filepath.Join(dir, "fig-toy-mae.svg"))
	for _, want := range []string{"log₂ scale", "MAE"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("figure lacks %q", want)
		}
	}
}

// TestAxisWords: metric names are words with their cut-off, and an ε
// composed into a per-user guarantee is labelled per rating.
func TestAxisWords(t *testing.T) {
	c := &Config{K: 10}
	for m, want := range map[string]string{"ndcg_at_k": "NDCG@10", "recall_at_k": "Recall@10", "precision_at_k": "Precision@10", "rmse": "RMSE"} {
		if got := c.metricName(m); got != want {
			t.Errorf("metricName(%s) = %q, want %q", m, got, want)
		}
	}
	ldp := []*Cell{{Epsilon: 2, GEpsilon: 260, GUnit: "user", GNotion: "local", GStatus: "proven"}}
	if got := epsilonAxis(ldp); !strings.Contains(got, "per rating") || !strings.Contains(got, "log₂") {
		t.Errorf("epsilonAxis(ldp) = %q", got)
	}
	if got := privacyLabel(ldp); got != "per-user local DP at 130 × the per-rating ε on the axis" {
		t.Errorf("privacyLabel(ldp) = %q", got)
	}
	// A fixed part (the mean report) composed with the cells makes the
	// ratio vary; its range is printed to the same digits at both ends.
	ranged := []*Cell{{Epsilon: 8, GEpsilon: 8*130 + 16, GUnit: "user", GNotion: "local", GStatus: "proven"},
		{Epsilon: 0.5, GEpsilon: 0.5*130 + 9.29, GUnit: "user", GNotion: "local", GStatus: "proven"}}
	if got := privacyLabel(ranged); got != "per-user local DP at 132–149 × the per-rating ε on the axis" {
		t.Errorf("privacyLabel(ranged) = %q", got)
	}
	joint := []*Cell{{Epsilon: 1, GEpsilon: 1, GUnit: "user", GNotion: "joint", GStatus: "proven"}}
	if got := epsilonAxis(joint); strings.Contains(got, "per rating") {
		t.Errorf("epsilonAxis(joint) = %q", got)
	}
	if got := privacyLabel(joint); got != "per-user joint DP" {
		t.Errorf("privacyLabel(joint) = %q", got)
	}
}
