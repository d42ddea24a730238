package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/aws/smithy-go"

	"github.com/joiner-dev/joiner/cloud/catalog"
)

// newPricingClient starts a sim of region and returns a Pricing client of
// the real SDK reaching it.
func newPricingClient(t *testing.T, region string) (*Sim, *pricing.Client) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Region = region
	cfg.Zones = catalog.DefaultZones(region)
	s := New(Options{Config: cfg})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, pricing.New(pricing.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
}

func term(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
}

// linuxOnDemand are Karpenter's GetProducts filters for a region's
// shared-tenancy Linux on-demand instances.
func linuxOnDemand(region string) []pricingtypes.Filter {
	return []pricingtypes.Filter{term("regionCode", region), term("serviceCode", "AmazonEC2"), term("preInstalledSw", "NA"),
		term("operatingSystem", "Linux"), term("capacitystatus", "Used"), term("marketoption", "OnDemand"),
		term("tenancy", "Shared"), term("productFamily", "Compute Instance")}
}

// testDoc is the part of a price list document the tests read.
type testDoc struct {
	Product struct {
		ProductFamily string            `json:"productFamily"`
		Attributes    map[string]string `json:"attributes"`
		SKU           string            `json:"sku"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				Description  string            `json:"description"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// allProducts pages through GetProducts; it returns the documents by
// instance type and the number of pages.
func allProducts(t *testing.T, c *pricing.Client, filters []pricingtypes.Filter, pageSize int32) (map[string]testDoc, int) {
	t.Helper()
	docs := map[string]testDoc{}
	pages := 0
	p := pricing.NewGetProductsPaginator(c, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: filters,
		FormatVersion: aws.String("aws_v1"), MaxResults: aws.Int32(pageSize)})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if aws.ToString(out.FormatVersion) != "aws_v1" || len(out.PriceList) > int(pageSize) {
			t.Fatalf("page %d: format %q, %d documents (page size %d)", pages, aws.ToString(out.FormatVersion), len(out.PriceList), pageSize)
		}
		for _, s := range out.PriceList {
			var d testDoc
			if err := json.Unmarshal([]byte(s), &d); err != nil {
				t.Fatalf("price list entry is not a JSON document: %v: %.80s", err, s)
			}
			it := d.Product.Attributes["instanceType"]
			if _, dup := docs[it]; dup {
				t.Fatalf("%s listed twice", it)
			}
			docs[it] = d
		}
	}
	return docs, pages
}

// price is a document's one on-demand hourly price in currency.
func (d testDoc) price(t *testing.T, currency string) string {
	t.Helper()
	var prices []string
	for _, term := range d.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			if dim.Unit != "Hrs" {
				t.Errorf("unit %q, want Hrs", dim.Unit)
			}
			prices = append(prices, dim.PricePerUnit[currency])
		}
	}
	if len(prices) != 1 {
		t.Fatalf("%d on-demand prices, want 1", len(prices))
	}
	return prices[0]
}

// GetProducts through the SDK's paginator: every shared-tenancy priced
// type of the sim's region once, in AWS's document shape, over pages of
// MaxResults; a region without embedded prices is priced like us-east-1
// until SetOnDemandPrices gives it its own.
func TestGetProductsPagesThroughSDK(t *testing.T) {
	s, c := newPricingClient(t, "eu-west-1")
	usEast, _ := catalog.EmbeddedPrices("us-east-1")
	shared := 0
	for name := range usEast.All() {
		if _, size, _ := strings.Cut(name, "."); !strings.HasPrefix(size, "metal") {
			shared++
		}
	}
	docs, pages := allProducts(t, c, linuxOnDemand("eu-west-1"), 100)
	if len(docs) != shared || pages != (shared+99)/100 {
		t.Errorf("%d documents in %d pages, want %d in %d", len(docs), pages, shared, (shared+99)/100)
	}
	m5 := docs["m5.large"]
	if a := m5.Product.Attributes; a["regionCode"] != "eu-west-1" || a["location"] != "EU (Ireland)" || a["tenancy"] != "Shared" ||
		a["operatingSystem"] != "Linux" || a["vcpu"] != "2" || a["memory"] != "8 GiB" || m5.Product.ProductFamily != "Compute Instance" ||
		len(m5.Product.SKU) != 16 {
		t.Errorf("m5.large product = %+v", m5.Product)
	}
	if got := m5.price(t, "USD"); got != "0.0960000000" {
		t.Errorf("m5.large in eu-west-1 (no embedded prices) = %s, want us-east-1's 0.0960000000", got)
	}
	if _, ok := docs["m5.metal"]; ok {
		t.Error("bare metal listed under shared tenancy")
	}

	s.SetOnDemandPrices("eu-west-1", map[string]float64{"m5.large": 0.107, "m5.metal": 5.136})
	docs, pages = allProducts(t, c, linuxOnDemand("eu-west-1"), 1)
	if len(docs) != 1 || pages != 1 || docs["m5.large"].price(t, "USD") != "0.1070000000" {
		t.Errorf("after SetOnDemandPrices: %d documents in %d pages: %+v", len(docs), pages, docs)
	}
	for _, dim := range docs["m5.large"].Terms.OnDemand {
		for _, d := range dim.PriceDimensions {
			if d.Description != "$0.107 per On Demand Linux m5.large Instance Hour" {
				t.Errorf("description %q", d.Description)
			}
		}
	}
	metal := []pricingtypes.Filter{term("regionCode", "eu-west-1"), term("tenancy", "Dedicated"), term("productFamily", "Compute Instance (bare metal)")}
	if docs, _ := allProducts(t, c, metal, 100); len(docs) != 1 || docs["m5.metal"].price(t, "USD") != "5.1360000000" {
		t.Errorf("bare metal: %+v", docs)
	}
	// The other regions of the partition keep their embedded prices.
	if docs, _ := allProducts(t, c, linuxOnDemand("us-gov-west-1"), 100); docs["m5.large"].price(t, "USD") != "0.1210000000" {
		t.Errorf("us-gov-west-1 m5.large: %+v", docs["m5.large"])
	}
	if s.Calls("GetProducts") < 4 {
		t.Errorf("GetProducts calls = %d", s.Calls("GetProducts"))
	}
}

// The China partition's prices are in CNY, and its Pricing API lists none
// of the other partitions' regions (nor they its).
func TestGetProductsPartitions(t *testing.T) {
	_, cn := newPricingClient(t, "cn-north-1")
	docs, _ := allProducts(t, cn, linuxOnDemand("cn-north-1"), 100)
	if got := docs["m5.large"].price(t, "CNY"); got != "1.0130000000" {
		t.Errorf("cn-north-1 m5.large = %q CNY, want 1.0130000000", got)
	}
	if docs, _ := allProducts(t, cn, linuxOnDemand("us-east-1"), 100); len(docs) != 0 {
		t.Errorf("China's Pricing API lists %d us-east-1 products", len(docs))
	}
	_, us := newPricingClient(t, "us-east-1")
	if docs, _ := allProducts(t, us, linuxOnDemand("cn-north-1"), 100); len(docs) != 0 {
		t.Errorf("the commercial Pricing API lists %d cn-north-1 products", len(docs))
	}
}

// Bad requests get AWS's errors, naming what is wrong.
func TestGetProductsErrors(t *testing.T) {
	_, c := newPricingClient(t, "us-east-1")
	ctx := context.Background()
	first, err := c.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: linuxOnDemand("us-east-1"), MaxResults: aws.Int32(10)})
	if err != nil || first.NextToken == nil {
		t.Fatalf("first page: %v, next token %v", err, first.NextToken)
	}
	for _, tc := range []struct {
		name string
		in   pricing.GetProductsInput
		code string
		msg  string
	}{
		{"token of another request", pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), NextToken: first.NextToken},
			"InvalidNextTokenException", "pagination token is invalid"},
		{"garbage token", pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), NextToken: aws.String("not-a-token")},
			"InvalidNextTokenException", "pagination token is invalid"},
		{"page too large", pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), MaxResults: aws.Int32(101)},
			"ValidationException", "Value '101' at 'maxResults'"},
		{"unknown filter type", pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"),
			Filters: []pricingtypes.Filter{{Type: "FUZZY", Field: aws.String("tenancy"), Value: aws.String("Shared")}}},
			"ValidationException", "Value 'FUZZY' at 'filters.1.member.type'"},
		{"format version", pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), FormatVersion: aws.String("aws_v2")},
			"InvalidParameterException", "FormatVersion aws_v2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.GetProducts(ctx, &tc.in)
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != tc.code || !strings.Contains(ae.ErrorMessage(), tc.msg) {
				t.Fatalf("error = %v, want %s containing %q", err, tc.code, tc.msg)
			}
		})
	}
	// Another service's products: none.
	out, err := c.GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonS3")})
	if err != nil || len(out.PriceList) != 0 || out.NextToken != nil {
		t.Errorf("AmazonS3 products: %d, %v", len(out.PriceList), err)
	}
}

func TestProductFilters(t *testing.T) {
	p := product{family: "Compute Instance", attrs: map[string]string{"instanceType": "m5.large", "tenancy": "Shared", "regionCode": "eu-west-1"}}
	f := func(typ, field, value string) pricingFilter {
		return pricingFilter{Type: typ, Field: field, Value: value}
	}
	for _, tc := range []struct {
		name    string
		filters []pricingFilter
		want    bool
	}{
		{"no filters", nil, true},
		{"term match", []pricingFilter{f("TERM_MATCH", "instanceType", "m5.large")}, true},
		{"term match is exact", []pricingFilter{f("TERM_MATCH", "instanceType", "m5")}, false},
		{"field names are exact", []pricingFilter{f("TERM_MATCH", "InstanceType", "m5.large")}, false},
		{"equals", []pricingFilter{f("EQUALS", "tenancy", "Shared")}, true},
		{"contains", []pricingFilter{f("CONTAINS", "instanceType", "m5.")}, true},
		{"any of", []pricingFilter{f("ANY_OF", "regionCode", "us-east-1, eu-west-1")}, true},
		{"none of", []pricingFilter{f("NONE_OF", "regionCode", "us-east-1,eu-west-1")}, false},
		{"none of a missing field", []pricingFilter{f("NONE_OF", "licenseModel", "BYOL")}, true},
		{"missing field", []pricingFilter{f("TERM_MATCH", "licenseModel", "BYOL")}, false},
		{"product family", []pricingFilter{f("TERM_MATCH", "productFamily", "Compute Instance"), f("TERM_MATCH", "serviceCode", "AmazonEC2")}, true},
		{"all must hold", []pricingFilter{f("TERM_MATCH", "tenancy", "Shared"), f("TERM_MATCH", "regionCode", "us-east-1")}, false},
	} {
		if got := p.matches(tc.filters); got != tc.want {
			t.Errorf("%s: matches = %v, want %v", tc.name, got, tc.want)
		}
	}
}
