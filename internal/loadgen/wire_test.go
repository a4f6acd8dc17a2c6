package loadgen

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/privrec/privrec/client"
	"github.com/privrec/privrec/service/api"
)

// TestWire: the lean sender's request is one the server's strict decoder
// reads back as the report sent, with the client's token, over one
// keep-alive connection; an acknowledgement of another report, an error
// status or a broken answer is an error, and the next report reconnects.
// The collection takes a mean report, which the request carries.
func TestWire(t *testing.T) {
	cfg := &api.Config{Mode: api.ModeLocal, Mechanism: "rr", ReportEpsilon: 2, CellEpsilon: 0.4375, MeanEpsilon: 0.25, MaxAbsMean: 1000, Budget: 4, Units: "levels",
		Items: []api.Item{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}, Scale: api.Scale{Min: 1, Max: 5, Levels: 5}}
	const mean = -3.0625 // noise may take it off the scale
	var conns = map[string]bool{}
	mode := "ok"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conns[r.RemoteAddr] = true
		if r.Method != http.MethodPost || r.URL.Path != api.PathReports || r.Header.Get("Authorization") != "Bearer prt_x" ||
			r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %s %s %v", r.Method, r.URL, r.Header)
		}
		rep, e := api.DecodeReport(r.Body, cfg)
		if e == nil && (len(rep.Values) != 4 || *rep.Values[3] != 3 || rep.Values[1] != nil) {
			t.Errorf("values arrived as %v", rep.Values)
		}
		if e == nil && *rep.Mean != mean {
			t.Errorf("the mean report arrived as %g, sent %g", *rep.Mean, mean)
		}
		if e != nil {
			t.Errorf("the server's decoder refuses the request: %v", e)
			w.WriteHeader(400)
			return
		}
		ack := api.Ack{ID: rep.ID, Accepted: true, Seq: 1, Epsilon: rep.Epsilon}
		switch mode {
		case "other":
			ack.ID = "someone-else"
		case "503":
			w.WriteHeader(503)
			w.Write([]byte(`{"error":"busy"}`))
			return
		case "garbage":
			w.WriteHeader(201)
			w.Write([]byte(`{"id":`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(ack)
	}))
	defer srv.Close()
	c := client.New(srv.URL, "prt_x")
	sub := newSubmitter(srv.URL, c)
	if _, ok := sub.(*wire); !ok {
		t.Fatalf("an http:// server gets %T, want the lean sender", sub)
	}
	defer sub.close()
	x, y := 3.0, 5.0
	mv := mean
	ctx := context.Background()
	for k, id := range []string{"r-1", "r-2", "r-3"} {
		if err := sub.submit(ctx, api.Report{ID: id, Epsilon: 2, Values: []*float64{&x, nil, &y, &x}, Mean: &mv}); err != nil {
			t.Fatalf("report %d: %v", k, err)
		}
	}
	if len(conns) != 1 {
		t.Fatalf("three reports used %d connections, want one kept alive", len(conns))
	}
	for _, m := range []string{"other", "503", "garbage"} {
		mode = m
		if err := sub.submit(ctx, api.Report{ID: "r-" + m, Epsilon: 2, Values: []*float64{&x, nil, &y, &x}, Mean: &mv}); err == nil {
			t.Fatalf("%s: no error", m)
		}
	}
	mode = "ok"
	if err := sub.submit(ctx, api.Report{ID: "r-4", Epsilon: 2, Values: []*float64{nil, nil, &y, &x}, Mean: &mv}); err != nil {
		t.Fatalf("after the errors: %v", err)
	}
	if err := sub.submit(ctx, api.Report{ID: "bad\"id", Epsilon: 2, Values: []*float64{nil, nil, nil, nil}}); err == nil || !strings.Contains(err.Error(), "escaping") {
		t.Fatalf("an ID needing escapes: %v", err)
	}
	// HTTPS (or a path prefix) goes through the reference client.
	if _, ok := newSubmitter("https://example.org", c).(viaClient); !ok {
		t.Fatal("https:// does not use the reference client")
	}
}
