package aws

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/cloud/sim"
)

// m5LargeEUWest1 is a GetProducts PriceList entry as AWS returns it (one
// JSON document in a string), trimmed of attributes nothing reads.
const m5LargeEUWest1 = `{"product":{"productFamily":"Compute Instance","attributes":{"enhancedNetworkingSupported":"Yes",` +
	`"intelTurboAvailable":"Yes","memory":"8 GiB","dedicatedEbsThroughput":"Up to 4750 Mbps","vcpu":"2","capacitystatus":"Used",` +
	`"locationType":"AWS Region","storage":"EBS only","instanceFamily":"General purpose","operatingSystem":"Linux",` +
	`"regionCode":"eu-west-1","physicalProcessor":"Intel Xeon Platinum 8175","servicecode":"AmazonEC2","networkPerformance":"Up to 10 Gigabit",` +
	`"servicename":"Amazon Elastic Compute Cloud","instanceType":"m5.large","tenancy":"Shared","usagetype":"EU-BoxUsage:m5.large",` +
	`"normalizationSizeFactor":"4","operation":"RunInstances","location":"EU (Ireland)","licenseModel":"No License required",` +
	`"marketoption":"OnDemand","preInstalledSw":"NA"},"sku":"H9RZ4JXQ3FN6C2FM"},"serviceCode":"AmazonEC2",` +
	`"terms":{"OnDemand":{"H9RZ4JXQ3FN6C2FM.JRTCKXETXF":{"priceDimensions":{"H9RZ4JXQ3FN6C2FM.JRTCKXETXF.6YS6EN2CT7":{` +
	`"unit":"Hrs","endRange":"Inf","description":"$0.107 per On Demand Linux m5.large Instance Hour","appliesTo":[],` +
	`"rateCode":"H9RZ4JXQ3FN6C2FM.JRTCKXETXF.6YS6EN2CT7","beginRange":"0","pricePerUnit":{"USD":"0.1070000000"}}},` +
	`"sku":"H9RZ4JXQ3FN6C2FM","effectiveDate":"2026-07-01T00:00:00Z","offerTermCode":"JRTCKXETXF","termAttributes":{}}}},` +
	`"version":"20260715143000","publicationDate":"2026-07-15T14:30:00Z"}`

// priceDoc is m5LargeEUWest1 for another instance type, family and
// price per unit.
func priceDoc(instanceType, family, pricePerUnit string) string {
	d := strings.ReplaceAll(m5LargeEUWest1, `"m5.large"`, strconv.Quote(instanceType))
	d = strings.Replace(d, `"Compute Instance"`, strconv.Quote(family), 1)
	return strings.Replace(d, `{"USD":"0.1070000000"}`, pricePerUnit, 1)
}

func TestParsePriceList(t *testing.T) {
	for _, tc := range []struct {
		name     string
		docs     []string
		currency string
		want     map[string]float64
		errs     []string
	}{
		{"aws document", []string{m5LargeEUWest1}, "USD", map[string]float64{"m5.large": 0.107}, nil},
		{"bare metal", []string{priceDoc("m5.metal", "Compute Instance (bare metal)", `{"USD":"5.1360000000"}`)}, "USD",
			map[string]float64{"m5.metal": 5.136}, nil},
		{"china", []string{priceDoc("m5.large", "Compute Instance", `{"CNY":"1.0130000000"}`)}, "CNY", map[string]float64{"m5.large": 1.013}, nil},
		{"another currency only", []string{m5LargeEUWest1}, "CNY", map[string]float64{}, nil},
		{"zero price skipped", []string{priceDoc("m5.large", "Compute Instance", `{"USD":"0.0000000000"}`)}, "USD", map[string]float64{}, nil},
		{"not an instance", []string{`{"product":{"productFamily":"Data Transfer","attributes":{"transferType":"AWS Outbound"}},"terms":{}}`},
			"USD", map[string]float64{}, nil},
		{"first price of a type wins", []string{m5LargeEUWest1, priceDoc("m5.large", "Compute Instance", `{"USD":"0.2000000000"}`)},
			"USD", map[string]float64{"m5.large": 0.107}, nil},
		{"malformed document", []string{`{"product":`, m5LargeEUWest1}, "USD", map[string]float64{"m5.large": 0.107},
			[]string{"price list document 0: unexpected end of JSON input"}},
		{"bad price", []string{priceDoc("c5.large", "Compute Instance", `{"USD":"cheap"}`)}, "USD", map[string]float64{},
			[]string{`price list document 0 (c5.large): pricePerUnit USD "cheap" in H9RZ4JXQ3FN6C2FM.JRTCKXETXF.6YS6EN2CT7 is not a price`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := ParsePriceList(tc.docs, tc.currency)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("prices = %v, want %v", got, tc.want)
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("errors = %v, want %v", errs, tc.errs)
			}
			for i, e := range errs {
				if e.Error() != tc.errs[i] {
					t.Errorf("error %d = %q, want %q", i, e, tc.errs[i])
				}
			}
		})
	}
}

// The GetProducts filters are Karpenter's: the region's Linux on-demand
// shared-tenancy instances, then bare metal.
func TestOnDemandQueries(t *testing.T) {
	var got []string
	for _, q := range onDemandQueries("eu-west-1") {
		var fs []string
		for _, f := range q {
			fs = append(fs, fmt.Sprintf("%s %s=%s", f.Type, aws.ToString(f.Field), aws.ToString(f.Value)))
		}
		got = append(got, strings.Join(fs, ", "))
	}
	common := "TERM_MATCH regionCode=eu-west-1, TERM_MATCH serviceCode=AmazonEC2, TERM_MATCH preInstalledSw=NA, " +
		"TERM_MATCH operatingSystem=Linux, TERM_MATCH capacitystatus=Used, TERM_MATCH marketoption=OnDemand, "
	want := []string{common + "TERM_MATCH tenancy=Shared, TERM_MATCH productFamily=Compute Instance",
		common + "TERM_MATCH tenancy=Dedicated, TERM_MATCH productFamily=Compute Instance (bare metal)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("queries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for region, want := range map[string]string{"us-east-2": "us-east-1", "eu-west-1": "eu-central-1", "ap-northeast-1": "ap-south-1",
		"cn-north-1": "cn-northwest-1", "us-gov-west-1": "us-east-1"} {
		if got := PricingRegion(region); got != want {
			t.Errorf("PricingRegion(%s) = %s, want %s", region, got, want)
		}
	}
}

// simRig is a sim of one region and a provider in that region reaching it
// through the real SDK clients, with the Pricing API.
type simRig struct {
	sim  *sim.Sim
	p    *Provider
	logs *observer.ObservedLogs
	reg  *prometheus.Registry
}

func newSimRig(t *testing.T, region string, opts Options) *simRig {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.Region, cfg.Zones = region, catalog.DefaultZones(region)
	for i := range cfg.Subnets {
		cfg.Subnets[i].Zone = cfg.Zones[i]
	}
	s := sim.New(sim.Options{Config: cfg})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	ac := NewClients(aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("AKIDSIM", "secret", "")}, srv.URL)
	core, logs := observer.New(zapcore.InfoLevel)
	r := &simRig{sim: s, logs: logs, reg: prometheus.NewRegistry()}
	opts.EC2, opts.Cluster, opts.Region, opts.Logger, opts.Registerer = ac.EC2, "test", region, zap.New(core), r.reg
	if opts.Pricing == nil {
		opts.Pricing = ac.Pricing
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	r.p = p
	return r
}

// offeringPrice is the price of an instance type's offering of a capacity
// type in zone ("": the first zone).
func offeringPrice(t *testing.T, p *Provider, name, zone, capacityType string) float64 {
	t.Helper()
	for _, o := range InstanceTypeOf(t, p, nil, name).Offerings {
		if o.CapacityType == capacityType && (zone == "" || o.Zone == zone) {
			return o.Price
		}
	}
	t.Fatalf("no %s offering of %s in %q", capacityType, name, zone)
	return 0
}

func (r *simRig) onDemandPrice(t *testing.T, name string) float64 {
	t.Helper()
	return offeringPrice(t, r.p, name, "", karpv1.CapacityTypeOnDemand)
}

func (r *simRig) sourceMetric(capacityType, source string) float64 {
	return testutil.ToFloat64(r.p.prices.gauge.WithLabelValues(capacityType, source))
}

// A provider in eu-west-1 prices offerings with eu-west-1's Pricing API
// answer (through the SDK's paginator, both of Karpenter's queries), not
// us-east-1's; until it answers, us-east-1's embedded prices stand in,
// with a warning.
func TestOnDemandPricesOfTheRegion(t *testing.T) {
	r := newSimRig(t, "eu-west-1", Options{})
	if got := r.p.PriceSources()[karpv1.CapacityTypeOnDemand]; got != sourceEmbeddedFallback {
		t.Errorf("source before the API answers = %s, want %s", got, sourceEmbeddedFallback)
	}
	if r.logs.FilterMessageSnippet("no embedded on-demand prices").FilterField(zap.String("region", "eu-west-1")).Len() != 1 {
		t.Errorf("want one warning about us-east-1 prices standing in: %v", r.logs.All())
	}
	if got := r.onDemandPrice(t, "m5.large"); got != 0.096 {
		t.Errorf("m5.large before the API answers = %v, want us-east-1's 0.096", got)
	}
	r.sim.SetOnDemandPrices("eu-west-1", map[string]float64{"m5.large": 0.107, "c5.large": 0.096, "m5.metal": 5.136})
	r.sim.SetOnDemandPrices("us-east-1", map[string]float64{"m5.large": 0.5, "m5.metal": 9})
	if err := r.p.RefreshOnDemandPrices(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"m5.large": 0.107, "c5.large": 0.096, "m5.metal": 5.136, "r5.large": 0.126} {
		if got := r.onDemandPrice(t, name); got != want {
			t.Errorf("%s = %v, want %v (eu-west-1's answer; what it leaves out keeps its price)", name, got, want)
		}
	}
	if got := r.p.PriceSources()[karpv1.CapacityTypeOnDemand]; got != sourcePricingAPI {
		t.Errorf("source = %s, want %s", got, sourcePricingAPI)
	}
	if r.sourceMetric(karpv1.CapacityTypeOnDemand, sourcePricingAPI) != 1 || testutil.CollectAndCount(r.p.prices.gauge) != 2 {
		t.Errorf("joiner_price_source: %d series, on-demand pricing-api = %v; want 2 series (one per capacity type)",
			testutil.CollectAndCount(r.p.prices.gauge), r.sourceMetric(karpv1.CapacityTypeOnDemand, sourcePricingAPI))
	}
	if n := r.sim.Calls("GetProducts"); n < 2 {
		t.Errorf("GetProducts calls = %d, want 2 (instances, bare metal: one page each)", n)
	}
}

// fakePricing answers GetProducts from docs by product family, pageSize
// documents a page, or fails with err; it records the calls.
type fakePricing struct {
	mu       sync.Mutex
	docs     map[string][]string
	pageSize int
	err      error
	calls    []*pricing.GetProductsInput
}

func (f *fakePricing) GetProducts(_ context.Context, in *pricing.GetProductsInput, _ ...func(*pricing.Options)) (*pricing.GetProductsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, in)
	if f.err != nil {
		return nil, f.err
	}
	var family string
	for _, flt := range in.Filters {
		if aws.ToString(flt.Field) == "productFamily" {
			family = aws.ToString(flt.Value)
		}
	}
	docs := f.docs[family]
	start, _ := strconv.Atoi(aws.ToString(in.NextToken))
	end := min(start+max(f.pageSize, 1), len(docs))
	out := &pricing.GetProductsOutput{PriceList: docs[start:end], FormatVersion: aws.String("aws_v1")}
	if end < len(docs) {
		out.NextToken = aws.String(strconv.Itoa(end))
	}
	return out, nil
}

func (f *fakePricing) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// On-demand prices come from the Pricing API, else the region's embedded
// snapshot, else us-east-1's (with a warning); a failed or partial answer
// changes nothing.
func TestOnDemandFallbackOrder(t *testing.T) {
	answer := map[string][]string{
		"Compute Instance": {priceDoc("m5.large", "Compute Instance", `{"USD":"0.2000000000"}`),
			priceDoc("c5.large", "Compute Instance", `{"USD":"0.1800000000"}`), priceDoc("r5.large", "Compute Instance", `{"USD":"0.2500000000"}`)},
		"Compute Instance (bare metal)": {priceDoc("m5.metal", "Compute Instance (bare metal)", `{"USD":"9.0000000000"}`)},
	}
	for _, tc := range []struct {
		name    string
		region  string
		api     *fakePricing
		isolate bool
		calls   int
		err     string
		source  string
		m5large float64
	}{
		{"api answers", "eu-west-1", &fakePricing{docs: answer, pageSize: 2}, false, 3, "", sourcePricingAPI, 0.2},
		{"api answers in us-east-1", "us-east-1", &fakePricing{docs: answer, pageSize: 100}, false, 2, "", sourcePricingAPI, 0.2},
		{"isolated vpc: embedded region", "us-gov-west-1", &fakePricing{docs: answer}, true, 0, "", sourceEmbedded, 0.121},
		{"govcloud: no pricing api", "us-gov-east-1", &fakePricing{docs: answer}, false, 0, "", sourceEmbedded, 0.121},
		{"isolated vpc: us-east-1", "eu-west-1", &fakePricing{docs: answer}, true, 0, "", sourceEmbeddedFallback, 0.096},
		{"api fails", "eu-west-1", &fakePricing{err: errors.New("AccessDenied")}, false, 1, "AccessDenied", sourceEmbeddedFallback, 0.096},
		{"api fails: embedded region", "cn-north-1", &fakePricing{err: errors.New("throttled")}, false, 1, "throttled", sourceEmbedded, 1.013},
		{"no bare metal answer", "eu-west-1", &fakePricing{docs: map[string][]string{"Compute Instance": answer["Compute Instance"]}, pageSize: 100},
			false, 2, "no on-demand prices for region eu-west-1 (3 instance, 0 bare-metal)", sourceEmbeddedFallback, 0.096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			p, err := New(Options{EC2: &fakeSpotEC2{}, Cluster: "test", Region: tc.region, Pricing: tc.api, IsolatedVPC: tc.isolate, Logger: zap.New(core)})
			if err != nil {
				t.Fatal(err)
			}
			err = p.RefreshOnDemandPrices(context.Background())
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("refresh error = %v, want %q", err, tc.err)
			}
			if n := tc.api.callCount(); n != tc.calls {
				t.Errorf("GetProducts calls = %d, want %d", n, tc.calls)
			}
			if got := p.PriceSources()[karpv1.CapacityTypeOnDemand]; got != tc.source {
				t.Errorf("source = %s, want %s", got, tc.source)
			}
			if got, _ := p.OnDemandPrices().Price("m5.large"); got != tc.m5large {
				t.Errorf("m5.large = %v, want %v", got, tc.m5large)
			}
			// The warning comes once, at the start, for a region without
			// embedded prices.
			_, exact := catalog.PricesFor(tc.region)
			if warned := logs.FilterMessageSnippet("no embedded on-demand prices").Len(); warned != map[bool]int{false: 1}[exact] {
				t.Errorf("fallback warnings logged: %d (region %s has embedded prices: %v)", warned, tc.region, exact)
			}
		})
	}
}

// fakeSpotEC2 answers DescribeSpotPriceHistory with pages (one per call,
// by NextToken index); the other EC2 calls are not made in these tests.
type fakeSpotEC2 struct {
	EC2API
	mu     sync.Mutex
	pages  [][]ec2types.SpotPrice
	inputs []*ec2.DescribeSpotPriceHistoryInput
}

func (f *fakeSpotEC2) DescribeSpotPriceHistory(_ context.Context, in *ec2.DescribeSpotPriceHistoryInput, _ ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inputs = append(f.inputs, in)
	i, _ := strconv.Atoi(aws.ToString(in.NextToken))
	out := &ec2.DescribeSpotPriceHistoryOutput{NextToken: aws.String("")}
	if i < len(f.pages) {
		out.SpotPriceHistory = f.pages[i]
	}
	if i+1 < len(f.pages) {
		out.NextToken = aws.String(strconv.Itoa(i + 1))
	}
	return out, nil
}

func spotPrice(it, zone, product, price string, at time.Time) ec2types.SpotPrice {
	return ec2types.SpotPrice{InstanceType: ec2types.InstanceType(it), AvailabilityZone: aws.String(zone),
		ProductDescription: ec2types.RIProductDescription(product), SpotPrice: aws.String(price), Timestamp: aws.Time(at)}
}

// Spot prices from the spot price history (every page; the newest price
// of each type and zone; Linux only) replace the model, which stays for
// the offerings the history leaves out; an empty answer keeps what is
// known.
func TestSpotHistoryOverModel(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	r := newSimRig(t, "us-east-1", Options{})
	f := &fakeSpotEC2{EC2API: r.p.ec2, pages: [][]ec2types.SpotPrice{
		{spotPrice("m5.large", "us-east-1a", "Linux/UNIX", "0.0400", t0.Add(-time.Hour)),
			spotPrice("m5.large", "us-east-1a", "Windows", "0.2000", t0)},
		{spotPrice("m5.large", "us-east-1a", "Linux/UNIX (Amazon VPC)", "0.0410", t0),
			spotPrice("m5.large", "us-east-1b", "Linux/UNIX", "not-a-price", t0),
			spotPrice("c5.large", "us-east-1b", "Linux/UNIX", "0.0300", t0)},
	}}
	p, err := New(Options{EC2: f, Cluster: "test", Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	price := func(it, zone string) float64 {
		p.mu.Lock()
		defer p.mu.Unlock()
		if v, ok := p.spot[spotKey{it, zone}]; ok {
			return v
		}
		return -1
	}
	if got := p.PriceSources()[karpv1.CapacityTypeSpot]; got != sourceSpotModel {
		t.Errorf("spot source before the history = %s, want model", got)
	}
	if err := p.RefreshSpotPrices(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(f.inputs) != 2 || f.inputs[0].StartTime == nil || !f.inputs[0].StartTime.Equal(t0) ||
		strings.Join(f.inputs[0].ProductDescriptions, ",") != "Linux/UNIX,Linux/UNIX (Amazon VPC)" {
		t.Fatalf("calls %d, first %+v: want 2 pages from now for Linux", len(f.inputs), f.inputs[0])
	}
	for _, tc := range []struct {
		it, zone string
		want     float64
	}{{"m5.large", "us-east-1a", 0.041}, {"c5.large", "us-east-1b", 0.03}, {"m5.large", "us-east-1b", -1}} {
		if got := price(tc.it, tc.zone); got != tc.want {
			t.Errorf("%s in %s = %v, want %v", tc.it, tc.zone, got, tc.want)
		}
	}
	if got := p.PriceSources()[karpv1.CapacityTypeSpot]; got != sourceSpotHistory {
		t.Errorf("spot source = %s, want %s", got, sourceSpotHistory)
	}
	// The offerings: the history where it has a price, the model elsewhere.
	m5, _ := catalog.Lookup("m5.large")
	if got, want := offeringPrice(t, p, "m5.large", "us-east-1b", karpv1.CapacityTypeSpot), catalog.DefaultSpotModel.Price(m5, "us-east-1b"); got != want {
		t.Errorf("m5.large spot in us-east-1b = %v, want the model's %v", got, want)
	}
	if got := offeringPrice(t, p, "m5.large", "us-east-1a", karpv1.CapacityTypeSpot); got != 0.041 {
		t.Errorf("m5.large spot in us-east-1a = %v, want the history's 0.041", got)
	}

	f.pages = nil
	if err := p.RefreshSpotPrices(context.Background()); err == nil || !strings.Contains(err.Error(), "no Linux spot prices") {
		t.Errorf("empty history: error %v", err)
	}
	if price("m5.large", "us-east-1a") != 0.041 || p.PriceSources()[karpv1.CapacityTypeSpot] != sourceSpotHistory {
		t.Error("an empty answer dropped the known spot prices")
	}
}

// After a failure a refresh is retried after a minute, then two, ... up to
// the refresh interval; after a success, at the interval.
func TestPriceRefreshSchedule(t *testing.T) {
	now := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	api := &fakePricing{err: errors.New("throttled")}
	spot := &fakeSpotEC2{pages: [][]ec2types.SpotPrice{{spotPrice("m5.large", "us-east-1a", "Linux/UNIX", "0.04", now)}}}
	p, err := New(Options{EC2: spot, Cluster: "test", Pricing: api, SpotPriceRefresh: 10 * time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	for range 5 {
		w := p.refreshPrices(context.Background())
		waits = append(waits, w)
		now = now.Add(w)
	}
	// On-demand fails at 0, 1m, 3m and 7m (retries after 1m, 2m, 4m, 8m),
	// spot succeeds at 0 and 10m: the loop wakes at 1m, 3m, 7m, 10m, 15m.
	if fmt.Sprint(waits) != "[1m0s 2m0s 4m0s 3m0s 5m0s]" {
		t.Errorf("waits = %v", waits)
	}
	if n := api.callCount(); n != 4 {
		t.Errorf("pricing calls = %d, want 4", n)
	}
	if n := len(spot.inputs); n != 2 {
		t.Errorf("spot refreshes = %d, want 2 (t=0, t=10m)", n)
	}
}
