package ratingio

import (
	"context"
	"strings"
	"testing"
)

// Lines starting with '#' are comments in every text format: a collect
// file (privrec collect) starts with such a header and must read as data.
func TestCommentLinesAreSkipped(t *testing.T) {
	tests := []struct {
		name, format, text string
		want               int
	}{
		{"collect header", "tsv", "# privrec-collect v1\n# mechanism=rr epsilon=1\n1\t1\t3\n1\t2\t4\n2\t1\t5\n", 3},
		{"comment between lines", "tsv", "1\t1\t3\n# note\n2\t1\t5\n", 2},
		{"detected", "auto", "# made by hand\n1\t1\t3\t881250949\n", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ReadContext(context.Background(), strings.NewReader(tc.text), "c.tsv", Options{Format: tc.format})
			if err != nil {
				t.Fatal(err)
			}
			if m.Len() != tc.want {
				t.Errorf("read %d ratings, want %d", m.Len(), tc.want)
			}
		})
	}
	// A file of comments only is empty, which is an error.
	if _, err := ReadContext(context.Background(), strings.NewReader("# nothing\n"), "c.tsv", Options{Format: "tsv"}); err == nil {
		t.Error("a file holding only comments was accepted")
	}
}
