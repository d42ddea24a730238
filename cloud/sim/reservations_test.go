package sim

import (
	"encoding/xml"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"
)

// reservationConfig is the default config with capacity reservations in
// us-east-1a: an ODCR of one m5.large (tagged team=ml), an open ODCR of two
// m5.xlarge owned by another account, a capacity block of one m5.2xlarge
// ending in two hours, and an expired ODCR.
func reservationConfig(now time.Time) Config {
	cfg := DefaultConfig()
	end := now.Add(2 * time.Hour)
	cfg.CapacityReservations = []CapacityReservation{
		{ID: "cr-0odcr", InstanceType: "m5.large", Zone: "us-east-1a", Total: 1, Tags: map[string]string{"team": "ml"}},
		{ID: "cr-0open", InstanceType: "m5.xlarge", Zone: "us-east-1a", Total: 2, InstanceMatchCriteria: "open", OwnerID: "210987654321",
			Tags: map[string]string{"team": "ml", "env": "prod"}},
		{ID: "cr-0block", InstanceType: "m5.2xlarge", Zone: "us-east-1a", Total: 1, Type: "capacity-block", End: &end},
		{ID: "cr-0gone", InstanceType: "m5.large", Zone: "us-east-1a", Total: 3, State: "expired", Tags: map[string]string{"team": "ml"}},
	}
	return cfg
}

func describeReservations(t *testing.T, h http.Handler, params url.Values) (describeCapacityReservationsResponse, string) {
	t.Helper()
	params.Set("Action", "DescribeCapacityReservations")
	code, body := call(t, h, params)
	var out describeCapacityReservationsResponse
	if code != http.StatusOK {
		return out, errorCode(t, body)
	}
	if err := xml.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return out, ""
}

func TestDescribeCapacityReservations(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New(Options{Config: reservationConfig(now), Now: func() time.Time { return now }}).Handler()
	tests := []struct {
		name   string
		params url.Values
		ids    []string
		code   string
	}{
		{"all", url.Values{}, []string{"cr-0odcr", "cr-0open", "cr-0block", "cr-0gone"}, ""},
		{"by id", url.Values{"CapacityReservationId.1": {"cr-0open"}}, []string{"cr-0open"}, ""},
		{"active by tag", url.Values{"Filter.1.Name": {"tag:team"}, "Filter.1.Value.1": {"ml"}, "Filter.2.Name": {"state"}, "Filter.2.Value.1": {"active"}},
			[]string{"cr-0odcr", "cr-0open"}, ""},
		{"tag key", url.Values{"Filter.1.Name": {"tag-key"}, "Filter.1.Value.1": {"env"}}, []string{"cr-0open"}, ""},
		{"owner", url.Values{"Filter.1.Name": {"owner-id"}, "Filter.1.Value.1": {"123456789012"}}, []string{"cr-0odcr", "cr-0block", "cr-0gone"}, ""},
		{"match criteria", url.Values{"Filter.1.Name": {"instance-match-criteria"}, "Filter.1.Value.1": {"open"}}, []string{"cr-0open"}, ""},
		{"type and zone", url.Values{"Filter.1.Name": {"instance-type"}, "Filter.1.Value.1": {"m5.2xlarge"},
			"Filter.2.Name": {"availability-zone"}, "Filter.2.Value.1": {"us-east-1a"}}, []string{"cr-0block"}, ""},
		{"end date type", url.Values{"Filter.1.Name": {"end-date-type"}, "Filter.1.Value.1": {"limited"}}, []string{"cr-0block"}, ""},
		{"max results", url.Values{"MaxResults": {"1000"}, "Filter.1.Name": {"state"}, "Filter.1.Value.1": {"expired"}}, []string{"cr-0gone"}, ""},
		{"unknown id", url.Values{"CapacityReservationId.1": {"cr-0nope"}}, nil, "InvalidCapacityReservationId.NotFound"},
		{"malformed id", url.Values{"CapacityReservationId.1": {"reservation-1"}}, nil, "InvalidCapacityReservationId.Malformed"},
		{"id with max results", url.Values{"CapacityReservationId.1": {"cr-0open"}, "MaxResults": {"10"}}, nil, "InvalidParameterCombination"},
		{"max results range", url.Values{"MaxResults": {"1001"}}, nil, "InvalidParameterValue"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, code := describeReservations(t, h, tc.params)
			var ids []string
			for _, r := range out.Reservations {
				ids = append(ids, r.ID)
			}
			if code != tc.code || !slices.Equal(ids, tc.ids) {
				t.Errorf("got %v %q, want %v %q", ids, code, tc.ids, tc.code)
			}
		})
	}
	out, _ := describeReservations(t, h, url.Values{"CapacityReservationId.1": {"cr-0block"}})
	got := out.Reservations[0]
	if got.AvailableInstanceCount != 1 || got.TotalInstanceCount != 1 || got.ReservationType != "capacity-block" || got.State != "active" ||
		got.EndDate != "2026-01-01T02:00:00Z" || got.InstanceMatchCriteria != "targeted" || got.OwnerID != ownerID || got.AvailabilityZone != "us-east-1a" {
		t.Errorf("capacity block: %+v", got)
	}
}

// reservedLaunch is launch template data that targets a reservation.
func reservedLaunch(id, market string) map[string]string {
	d := map[string]string{"CapacityReservationSpecification.CapacityReservationPreference": "capacity-reservations-only",
		"CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId": id}
	if market != "" {
		d["InstanceMarketOptions.MarketType"] = market
	}
	return d
}

// TestReservedLaunches: a launch into a reservation takes one of its
// instances and refuses, per override, what EC2 refuses: a full
// reservation (ReservationCapacityExceeded), an ended one, an unknown one,
// another instance type, and a market type that does not match the
// reservation (capacity-block for capacity blocks only).
func TestReservedLaunches(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(Options{Config: reservationConfig(now), Now: func() time.Time { return now }})
	block := url.Values{"TargetCapacitySpecification.DefaultTargetCapacityType": {"capacity-block"}}
	tests := []struct {
		name, itype string
		data        map[string]string
		extra       url.Values
		code        string // "" launches
		lifecycle   string
	}{
		{"into an ODCR", "m5.large", reservedLaunch("cr-0odcr", ""), nil, "", ""},
		{"ODCR full", "m5.large", reservedLaunch("cr-0odcr", ""), nil, "ReservationCapacityExceeded", ""},
		{"into a capacity block", "m5.2xlarge", reservedLaunch("cr-0block", "capacity-block"), block, "", "capacity-block"},
		{"capacity block without its market type", "m5.2xlarge", reservedLaunch("cr-0block", ""), nil, "InvalidParameterValue", ""},
		{"ODCR as a capacity block", "m5.xlarge", reservedLaunch("cr-0open", "capacity-block"), block, "InvalidParameterValue", ""},
		{"another instance type", "m5.xlarge", reservedLaunch("cr-0odcr", ""), nil, "InvalidParameterValue", ""},
		{"unknown reservation", "m5.large", reservedLaunch("cr-0nope", ""), nil, "InvalidCapacityReservationId.NotFound", ""},
		{"expired reservation", "m5.large", reservedLaunch("cr-0gone", ""), nil, "InsufficientInstanceCapacity", ""},
		{"capacity-block target without a reservation", "m5.large", nil, block, "InvalidParameterValue", ""},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := launchWith(t, s, "lt-"+string(rune('a'+i)), tc.itype, tc.data, tc.extra)
			if tc.code != "" {
				if len(out.Instances) != 0 || len(out.Errors) != 1 || out.Errors[0].Code != tc.code {
					t.Errorf("got %+v, want error %s", out, tc.code)
				}
				return
			}
			if len(out.Instances) != 1 {
				t.Fatalf("not launched: %+v", out.Errors)
			}
			s.mu.Lock()
			in := *s.instances[out.Instances[0].InstanceIDs[0]]
			s.mu.Unlock()
			x := s.x(&in)
			if x.CapacityReservationID != tc.data["CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"] ||
				x.CapResPreference != "capacity-reservations-only" || x.Lifecycle != tc.lifecycle {
				t.Errorf("instance %+v", x)
			}
		})
	}
	h := s.Handler()
	if out, _ := describeReservations(t, h, url.Values{"CapacityReservationId.1": {"cr-0odcr"}}); out.Reservations[0].AvailableInstanceCount != 0 {
		t.Errorf("full ODCR: %+v", out.Reservations[0])
	}
	// An ODCR that ends leaves its instances running on demand; a capacity
	// block that ends takes its instances back.
	for _, id := range []string{"cr-0odcr", "cr-0block"} {
		if err := s.SetCapacityReservationState(id, "expired"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetCapacityReservationState("cr-0nope", "expired"); err == nil {
		t.Error("unknown reservation: no error")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.instances {
		switch in.Type {
		case "m5.large":
			if in.ReservationID != "" || in.State != "pending" {
				t.Errorf("instance of the ended ODCR: %+v", in)
			}
		case "m5.2xlarge":
			if in.State != "shutting-down" {
				t.Errorf("instance of the ended capacity block: %+v", in)
			}
		}
	}
}
