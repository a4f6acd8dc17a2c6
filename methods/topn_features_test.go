package methods

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/privrec/privrec/privacy/noise"
	"github.com/privrec/privrec/release"
	"github.com/privrec/privrec/synth"
	"github.com/privrec/privrec/transform"
)

// TestDPFeaturesBeatsGramAtSmallEpsilon: on a synthetic population whose
// users draw half their items from a favourite genre (synth.Implicit,
// 5 000 users × 200 items, 8 genres; 500 held-out users), the genres
// declared as public item features let dp-features beat dp-popularity and
// dp-ease at ε = 0.5 (mean Recall@20 of noise seeds 100–102); without the
// features it is popularity again. The margins are several times the
// seed-to-seed spread (measured: docs/topn.md).
func TestDPFeaturesBeatsGramAtSmallEpsilon(t *testing.T) {
	cfg := synth.ImplicitConfig{Users: 5000, Items: 200, Interactions: 150_000, Rank: 8, PopExponent: 0.8, ActivitySpread: 0.8, Taste: 0.5}
	const dataSeed = 7
	in, sp := implicitHeldOut(t, cfg, dataSeed, 500)
	path := filepath.Join(t.TempDir(), "features.tsv")
	var b strings.Builder
	for j, g := range cfg.Genres(dataSeed) {
		fmt.Fprintf(&b, "%s\tgenre%d\n", in.Declared.Catalogue.IDs()[j], g)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	recall := func(method string, params map[string]any) float64 {
		return meanHeldOutRecall(t, method, params, 0.5, in, sp)
	}
	withF := recall("dp-features", map[string]any{"item_features": path})
	without := recall("dp-features", nil)
	pop := recall("dp-popularity", nil)
	ease := recall("dp-ease", nil)
	t.Logf("ε = 0.5: dp-features %.4f (without features %.4f), dp-popularity %.4f, dp-ease %.4f", withF, without, pop, ease)
	if withF < ease+0.02 || withF < pop+0.05 {
		t.Errorf("dp-features %.4f should beat dp-ease %.4f by 0.02 and dp-popularity %.4f by 0.05", withF, ease, pop)
	}
	if without > pop+0.01 {
		t.Errorf("dp-features without features %.4f should be popularity (dp-popularity %.4f)", without, pop)
	}
}

// meanHeldOutRecall trains method with params at eps on noise seeds
// 100–102 and returns the mean held-out Recall@20.
func meanHeldOutRecall(t *testing.T, method string, params map[string]any, eps float64, in release.Input, sp *transform.UserSplit) float64 {
	t.Helper()
	var sum float64
	for s := range uint64(3) {
		cfg, err := Configure(method, params)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := Train(context.Background(), method, cfg, in, Env{Epsilon: eps, Delta: 1e-6, Noise: noise.Seeded(100 + s), Seed: 1})
		if err != nil {
			t.Fatalf("%s ε = %g: %v", method, eps, err)
		}
		rep, err := EvaluateHeldOut(context.Background(), rel.Model(), sp.TestHistory, sp.TestTargets, HeldOutOptions{Ks: []int{20}})
		if err != nil {
			t.Fatal(err)
		}
		sum += rep.Recall[20] / 3
	}
	return sum
}
