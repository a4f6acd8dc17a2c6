package experiment

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// featuresFile is the spec's public item-features file in the
// catalogue's item IDs: Features itself, or (with FeatureIDs) a copy
// written into out whose lines name the catalogue's IDs in place of the
// features file's own ("" without Features). MovieLens-1M as distributed
// here numbers its items 1…3 706 while movies.dat keeps MovieLens'
// MovieIDs; the copy keeps each line's form, so the method reads it as
// it reads the original.
func (s *TopNSpec) featuresFile(dataDir, out string) (string, error) {
	if s.Features == "" {
		return "", nil
	}
	src := resolve(dataDir, s.Features)
	if s.FeatureIDs == "" {
		return src, nil
	}
	ids, err := readIDMap(resolve(dataDir, s.FeatureIDs))
	if err != nil {
		return "", fmt.Errorf("dataset %s: %w", s.Name, err)
	}
	in, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("dataset %s: public item features: %w", s.Name, err)
	}
	var b strings.Builder
	for n, line := range strings.Split(string(in), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		sep := "::"
		if !strings.Contains(line, sep) {
			sep = "\t"
		}
		id, rest, ok := strings.Cut(line, sep)
		if !ok {
			return "", fmt.Errorf("%s:%d: no %q after the item ID", src, n+1, sep)
		}
		if cat, ok := ids[strings.TrimSpace(id)]; ok {
			b.WriteString(cat + sep + rest + "\n")
		}
	}
	path := filepath.Join(out, "item-features"+filepath.Ext(src))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("writing the public item features in the catalogue's IDs: %w", err)
	}
	return path, nil
}

// readIDMap reads a two-column table (a header line, then catalogue ID,
// features-file ID) into a map from the features file's IDs to the
// catalogue's.
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
		ids[strings.TrimSpace(feat)] = strings.TrimSpace(cat)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return ids, nil
}
