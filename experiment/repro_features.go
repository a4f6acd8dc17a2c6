package experiment

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/privrec/privrec/model"
)

// itemFeatures reads the spec's public item features (nil without
// Features) for the catalogue items ids. With FeatureIDs the features
// file names items by other IDs — MovieLens-1M as distributed here
// numbers its items 1…3 706 while movies.dat keeps MovieLens' MovieIDs —
// so each catalogue item is looked up by its ID in the file; a catalogue
// item the map lacks has the intercept only.
func (s *TopNSpec) itemFeatures(dataDir string, ids []string) (*model.ItemFeatures, error) {
	if s.Features == "" {
		return nil, nil
	}
	if s.FeatureIDs != "" {
		byCat, err := readIDMap(resolve(dataDir, s.FeatureIDs))
		if err != nil {
			return nil, fmt.Errorf("dataset %s: %w", s.Name, err)
		}
		mapped := make([]string, len(ids))
		for k, id := range ids {
			mapped[k] = byCat[id] // "": no line names it (an empty ID is an error)
		}
		ids = mapped
	}
	path := resolve(dataDir, s.Features)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: public item features: %w", s.Name, err)
	}
	defer f.Close()
	feats, err := model.ReadItemFeatures(f, path, ids)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: public item features: %w", s.Name, err)
	}
	return feats, nil
}

// readIDMap reads a two-column table (a header line, then catalogue ID,
// features-file ID) into a map from the catalogue's IDs to the features
// file's.
func readIDMap(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("item ID map: %w", err)
	}
	defer f.Close()
	ids := map[string]string{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if line == 1 || strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		cat, feat, ok := strings.Cut(strings.TrimSpace(sc.Text()), "\t")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want CATALOGUE-ID<TAB>FEATURES-ID", path, line)
		}
		ids[strings.TrimSpace(cat)] = strings.TrimSpace(feat)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return ids, nil
}
