package catalog

import (
	"strconv"
	"strings"
	"testing"
	"time"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

var t0Prices = time.Date(2026, 7, 20, 13, 44, 30, 0, time.UTC)

// The embedded price files: which regions, their metadata (data/README.md)
// and a price each.
func TestEmbeddedPriceFiles(t *testing.T) {
	if got := strings.Join(EmbeddedPriceRegions(), ","); got != "cn-north-1,us-east-1,us-gov-east-1,us-gov-west-1" {
		t.Errorf("embedded regions = %s", got)
	}
	for _, tc := range []struct {
		region, currency, generated string
		rows                        int
		m5large                     float64
	}{
		{"us-east-1", "USD", "2026-07-20T13:44:30Z", 1367, 0.096},
		{"us-gov-east-1", "USD", "2026-07-20T13:44:38Z", 549, 0.121},
		{"us-gov-west-1", "USD", "2026-07-20T13:44:38Z", 770, 0.121},
		{"cn-north-1", "CNY", "2024-11-06T01:00:11Z", 316, 1.013},
	} {
		p, ok := EmbeddedPrices(tc.region)
		if !ok {
			t.Errorf("%s: not embedded", tc.region)
			continue
		}
		if p.Region != tc.region || p.Currency != tc.currency || p.Generated.Format(time.RFC3339) != tc.generated ||
			!strings.Contains(p.Source, "aws/karpenter-provider-aws") || p.Len() != tc.rows {
			t.Errorf("%s: %s %s %s %q, %d rows; want %s %s, %d rows from karpenter-provider-aws",
				tc.region, p.Region, p.Currency, p.Generated.Format(time.RFC3339), p.Source, p.Len(), tc.currency, tc.generated, tc.rows)
		}
		if got, ok := p.Price("m5.large"); !ok || got != tc.m5large {
			t.Errorf("%s: m5.large = %v, %v; want %v", tc.region, got, ok, tc.m5large)
		}
	}
}

func TestParsePriceFileErrors(t *testing.T) {
	const meta = "# region: eu-west-1\n# currency: USD\n# source: test\n# generated: 2026-07-20T13:44:30Z\n"
	const header = "name,on_demand_per_hour\n"
	if p, err := parsePriceFile([]byte(meta + header + "m5.large,0.107\n")); err != nil || p.Region != "eu-west-1" {
		t.Fatalf("good file: %+v, %v", p, err)
	}
	for _, tc := range []struct{ name, data, want string }{
		{"no region", strings.Replace(meta, "# region: eu-west-1\n", "", 1) + header, `no "# region: ..." line`},
		{"not key value", "# region eu-west-1\n" + header, `line 1: "# region eu-west-1" is not "# key: value"`},
		{"bad currency", strings.Replace(meta, "USD", "dollars", 1) + header, `currency "dollars" is not a 3-letter code`},
		{"bad date", strings.Replace(meta, "2026-07-20T13:44:30Z", "July 2026", 1) + header, `generated "July 2026" is not an RFC 3339 time`},
		{"bad column", meta + "name,on_demand_usd_per_hour\n", `header column 2: want "on_demand_per_hour", got "on_demand_usd_per_hour"`},
		{"negative", meta + header + "m5.large,-1\n", `line 6 (m5.large): on_demand_per_hour "-1" is not a non-negative number`},
		{"not a number", meta + header + "m5.large,0.1\nm5.xlarge,cheap\n", `line 7 (m5.xlarge): on_demand_per_hour "cheap"`},
		{"duplicate", meta + header + "m5.large,0.1\nm5.large,0.2\n", `line 7: duplicate name "m5.large"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parsePriceFile([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// A region's offerings carry its own prices (on-demand, and the spot model
// on top of them); a region without embedded prices is priced like
// us-east-1; Options.Prices wins over both.
func TestInstanceTypesUseRegionPrices(t *testing.T) {
	gov, _ := EmbeddedPrices("us-gov-west-1")
	custom := NewPriceTable("eu-west-1", "USD", "test", t0Prices, map[string]float64{"m5.large": 0.107})
	for _, tc := range []struct {
		name   string
		opts   Options
		exact  bool
		want   float64
		priced int
	}{
		{"us-east-1", Options{}, true, 0.096, 1345},
		{"govcloud", Options{Region: "us-gov-west-1"}, true, 0.121, -1},
		{"no embedded prices", Options{Region: "eu-west-1"}, false, 0.096, 1345},
		{"explicit table", Options{Region: "eu-west-1", Prices: custom}, false, 0.107, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, exact := PricesFor(tc.opts.Region); exact != tc.exact {
				t.Errorf("PricesFor(%q) exact = %v, want %v", tc.opts.Region, exact, tc.exact)
			}
			its := InstanceTypes(tc.opts)
			if tc.priced >= 0 && len(its) != tc.priced {
				t.Errorf("%d priced instance types, want %d", len(its), tc.priced)
			}
			it := find(t, its, "m5.large")
			e, _ := Lookup("m5.large")
			e.OnDemandPrice = tc.want
			for _, o := range it.Offerings {
				want := tc.want
				if o.CapacityType == karpv1.CapacityTypeSpot {
					want = DefaultSpotModel.Price(e, o.Zone)
				}
				if o.Price != want {
					t.Errorf("%s %s price %v, want %v", o.Zone, o.CapacityType, o.Price, want)
				}
			}
		})
	}
	// GovCloud has fewer types than us-east-1: only its priced ones.
	if n := len(InstanceTypes(Options{Region: "us-gov-west-1"})); n == 0 || n >= 1345 || n > gov.Len() {
		t.Errorf("us-gov-west-1 instance types = %d, want its priced subset (< 1345, <= %d)", n, gov.Len())
	}
}

// The cache tells tables apart by content, not by pointer; All yields by
// name.
func TestPriceTableKeys(t *testing.T) {
	base := NewPriceTable("eu-west-1", "USD", "embedded", t0Prices, map[string]float64{"m5.large": 0.1, "c5.large": 0.09})
	same := NewPriceTable("eu-west-1", "USD", "other", t0Prices.Add(time.Hour), map[string]float64{"c5.large": 0.09, "m5.large": 0.1})
	next := NewPriceTable("eu-west-1", "USD", "pricing-api", t0Prices, map[string]float64{"c5.large": 0.09, "m5.large": 0.107, "r5.large": 0.141})
	var got []string
	for name, p := range next.All() {
		got = append(got, name+"="+strconv.FormatFloat(p, 'f', -1, 64))
	}
	if strings.Join(got, ",") != "c5.large=0.09,m5.large=0.107,r5.large=0.141" {
		t.Errorf("All = %v", got)
	}
	if base.key != same.key || base.key == next.key {
		t.Errorf("keys %s %s %s: equal content must share a key, other content not", base.key, same.key, next.key)
	}
	a := InstanceTypes(Options{Region: "eu-west-1", Prices: base})
	b := InstanceTypes(Options{Region: "eu-west-1", Prices: same})
	c := InstanceTypes(Options{Region: "eu-west-1", Prices: next})
	if len(a) != 2 || len(c) != 3 || a[0] != b[0] || a[0] == c[0] {
		t.Errorf("instance types %d/%d/%d; equal tables must hit the cache, others not", len(a), len(b), len(c))
	}
}
