package service_test

import (
	"os"
	"strings"
	"testing"

	"github.com/privrec/privrec/service/api"
)

// TestOpenAPIPaths: docs/openapi.yaml documents every endpoint.
func TestOpenAPIPaths(t *testing.T) {
	b, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, p := range []string{api.PathConfig, api.PathEnroll, api.PathMe, api.PathMyState, api.PathReports, api.PathReports + "/{id}",
		api.PathLatestRelease, api.PathReleases + "/{id}", api.PathAdminReleases, api.PathAdminStats, api.PathHealth, api.PathMetrics,
		api.PathLive, api.PathReady, api.PathMyToken} {
		if !strings.Contains(doc, "\n  "+p+":\n") {
			t.Errorf("docs/openapi.yaml does not document %s", p)
		}
	}
}
