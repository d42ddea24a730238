package sim

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/cloud/catalog"
)

// The AWS Price List Query API (JSON 1.1, X-Amz-Target
// AWSPriceListService.*): GetProducts lists the Linux on-demand products
// of EC2 instance types with AWS's document shape (PriceList entries are
// JSON documents in strings: product with attributes, terms.OnDemand with
// price dimensions), filters (TERM_MATCH, EQUALS, CONTAINS, ANY_OF,
// NONE_OF on a product attribute, productFamily or serviceCode) and pages
// of up to 100 with an opaque NextToken bound to the request.
//
// The products are those of the regions of the sim's partition with
// embedded prices (catalog.EmbeddedPrices) and of the sim's own region,
// which without embedded prices of its own is priced like us-east-1;
// SetOnDemandPrices replaces a region's.
const (
	pricingFormatVersion = "aws_v1"
	maxProductsPage      = 100
	// onDemandOfferTerm and hourlyRateCode are the price list's codes of
	// the on-demand offer term and its per-hour rate.
	onDemandOfferTerm = "JRTCKXETXF"
	hourlyRateCode    = "6YS6EN2CT7"
)

// SetOnDemandPrices makes the Pricing API answer with prices for region's
// Linux on-demand products (all of them: instance types not in prices are
// no longer listed for the region).
func (s *Sim) SetOnDemandPrices(region string, prices map[string]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.onDemand == nil {
		s.onDemand = map[string]*catalog.PriceTable{}
	}
	currency := "USD"
	if strings.HasPrefix(region, "cn-") {
		currency = "CNY"
	}
	s.onDemand[region] = catalog.NewPriceTable(region, currency, "joiner sim", s.now().UTC(), prices)
}

// pricingRegions are the price tables GetProducts serves, by region.
func (s *Sim) pricingRegions() map[string]*catalog.PriceTable {
	china := strings.HasPrefix(s.cfg.Region, "cn-")
	out := map[string]*catalog.PriceTable{}
	for _, r := range catalog.EmbeddedPriceRegions() {
		if strings.HasPrefix(r, "cn-") == china {
			out[r], _ = catalog.EmbeddedPrices(r)
		}
	}
	if _, ok := out[s.cfg.Region]; !ok {
		t, _ := catalog.PricesFor(s.cfg.Region)
		out[s.cfg.Region] = t
	}
	for r, t := range s.onDemand {
		out[r] = t
	}
	return out
}

type pricingFilter struct {
	Type  string `json:"Type"`
	Field string `json:"Field"`
	Value string `json:"Value"`
}

type getProductsRequest struct {
	ServiceCode   *string         `json:"ServiceCode"`
	Filters       []pricingFilter `json:"Filters"`
	FormatVersion *string         `json:"FormatVersion"`
	NextToken     *string         `json:"NextToken"`
	MaxResults    *int            `json:"MaxResults"`
}

// servePricing answers the Pricing JSON API.
func (s *Sim) servePricing(w http.ResponseWriter, target string, body []byte) {
	var in getProductsRequest
	if !decodeJSONCall(w, target, "AWSPriceListService.GetProducts", body, &in) {
		return
	}
	if code, msg := in.validate(); code != "" {
		writeJSONError(w, http.StatusBadRequest, code, msg)
		return
	}
	s.mu.Lock()
	s.calls["GetProducts"]++
	tables := s.pricingRegions()
	s.mu.Unlock()
	var matched []product
	if *in.ServiceCode == "AmazonEC2" {
		for _, r := range slices.Sorted(maps.Keys(tables)) {
			if !regionWanted(in.Filters, r) {
				continue
			}
			for _, p := range products(r, tables[r]) {
				if p.matches(in.Filters) {
					matched = append(matched, p)
				}
			}
		}
	}
	start := 0
	if in.NextToken != nil {
		var ok bool
		if start, ok = in.offset(*in.NextToken); !ok || start > len(matched) {
			writeJSONError(w, http.StatusBadRequest, "InvalidNextTokenException", "The pagination token is invalid. Try again without a pagination token.")
			return
		}
	}
	size := maxProductsPage
	if in.MaxResults != nil {
		size = *in.MaxResults
	}
	end := min(start+size, len(matched))
	out := struct {
		FormatVersion string   `json:"FormatVersion"`
		PriceList     []string `json:"PriceList"`
		NextToken     *string  `json:"NextToken,omitempty"`
	}{FormatVersion: pricingFormatVersion, PriceList: make([]string, 0, end-start)}
	for _, p := range matched[start:end] {
		out.PriceList = append(out.PriceList, p.document())
	}
	if end < len(matched) {
		tok := in.token(end)
		out.NextToken = &tok
	}
	_ = json.NewEncoder(w).Encode(out)
}

var filterTypes = []string{"TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF"}

// validate checks the request as AWS does: the error code and message, or
// "" when it is valid.
func (in *getProductsRequest) validate() (string, string) {
	if in.ServiceCode == nil || *in.ServiceCode == "" {
		return "ValidationException", "1 validation error detected: Value null at 'serviceCode' failed to satisfy constraint: Member must not be null"
	}
	if in.FormatVersion != nil && *in.FormatVersion != pricingFormatVersion {
		return "InvalidParameterException", fmt.Sprintf("Input FormatVersion %s is not supported: want %s", *in.FormatVersion, pricingFormatVersion)
	}
	if m := in.MaxResults; m != nil && (*m < 1 || *m > maxProductsPage) {
		return "ValidationException", fmt.Sprintf("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: "+
			"Member must have value between 1 and %d", *m, maxProductsPage)
	}
	for i, f := range in.Filters {
		if !slices.Contains(filterTypes, f.Type) {
			return "ValidationException", fmt.Sprintf("1 validation error detected: Value '%s' at 'filters.%d.member.type' failed to satisfy constraint: "+
				"Member must satisfy enum value set: [%s]", f.Type, i+1, strings.Join(filterTypes, ", "))
		}
		if f.Field == "" || f.Value == "" {
			return "InvalidParameterException", fmt.Sprintf("Filter %d (%s): Field and Value are required", i+1, f.Type)
		}
	}
	return "", ""
}

// fingerprint identifies the request apart from its paging.
func (in *getProductsRequest) fingerprint() uint64 {
	h := fnv.New64a()
	b, _ := json.Marshal(struct {
		S *string
		F []pricingFilter
		V *string
	}{in.ServiceCode, in.Filters, in.FormatVersion})
	h.Write(b)
	return h.Sum64()
}

// token is the NextToken of the page starting at offset.
func (in *getProductsRequest) token(offset int) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], in.fingerprint())
	binary.BigEndian.PutUint64(b[8:], uint64(offset))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// offset reads a NextToken of this request.
func (in *getProductsRequest) offset(tok string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) != 16 || binary.BigEndian.Uint64(b[:8]) != in.fingerprint() {
		return 0, false
	}
	o := binary.BigEndian.Uint64(b[8:])
	return int(o), o <= 1<<31
}

// regionWanted: the filters on regionCode and location let region's
// products through (its products need not be built otherwise).
func regionWanted(filters []pricingFilter, region string) bool {
	var fs []pricingFilter
	for _, f := range filters {
		if f.Field == "regionCode" || f.Field == "location" {
			fs = append(fs, f)
		}
	}
	return product{attrs: map[string]string{"regionCode": region, "location": locationName(region)}}.matches(fs)
}

// product is one Linux on-demand EC2 product of the price list.
type product struct {
	sku, family string
	attrs       map[string]string
	price       float64
	currency    string
	published   time.Time
}

// products are a region's products, by instance type.
func products(region string, t *catalog.PriceTable) []product {
	var out []product
	for name, price := range t.All() {
		p := product{family: "Compute Instance", price: price, currency: t.Currency, published: t.Generated, attrs: map[string]string{
			"servicecode": "AmazonEC2", "servicename": "Amazon Elastic Compute Cloud", "location": locationName(region),
			"locationType": "AWS Region", "regionCode": region, "instanceType": name, "tenancy": "Shared",
			"operatingSystem": "Linux", "licenseModel": "No License required", "preInstalledSw": "NA", "capacitystatus": "Used",
			"marketoption": "OnDemand", "operation": "RunInstances", "usagetype": "BoxUsage:" + name,
		}}
		family, size, _ := strings.Cut(name, ".")
		p.attrs["instanceFamily"] = family
		if strings.HasPrefix(size, "metal") {
			// Bare metal is listed as its own family with dedicated
			// tenancy (Karpenter's second query).
			p.family, p.attrs["tenancy"] = "Compute Instance (bare metal)", "Dedicated"
			p.attrs["usagetype"] = "DedicatedUsage:" + name
		}
		if e, ok := catalog.Lookup(name); ok {
			p.attrs["vcpu"] = strconv.Itoa(e.VCPU)
			p.attrs["memory"] = strconv.FormatFloat(float64(e.MemoryMiB)/1024, 'f', -1, 64) + " GiB"
		}
		p.sku = sku(region, name, p.family)
		out = append(out, p)
	}
	return out
}

// sku is a product's stable SKU: 16 base-32 characters of its identity.
func sku(parts ...string) string {
	var b [10]byte
	h := fnv.New64a()
	h.Write([]byte(strings.Join(parts, "|")))
	binary.BigEndian.PutUint64(b[:8], h.Sum64())
	h.Write([]byte("+"))
	binary.BigEndian.PutUint16(b[8:], uint16(h.Sum64()))
	return base32.StdEncoding.EncodeToString(b[:])
}

// attr is the value a filter's Field names.
func (p product) attr(field string) (string, bool) {
	switch field {
	case "productFamily":
		return p.family, true
	case "serviceCode":
		return "AmazonEC2", true
	case "sku":
		return p.sku, true
	}
	v, ok := p.attrs[field]
	return v, ok
}

// matches: every filter holds (ANY_OF/NONE_OF take comma-separated
// values; a field the product lacks matches only NONE_OF).
func (p product) matches(filters []pricingFilter) bool {
	for _, f := range filters {
		v, ok := p.attr(f.Field)
		var hit bool
		switch f.Type {
		case "TERM_MATCH", "EQUALS":
			hit = ok && v == f.Value
		case "CONTAINS":
			hit = ok && strings.Contains(v, f.Value)
		case "ANY_OF":
			hit = ok && slices.Contains(splitValues(f.Value), v)
		case "NONE_OF":
			hit = !ok || !slices.Contains(splitValues(f.Value), v)
		}
		if !hit {
			return false
		}
	}
	return true
}

func splitValues(v string) []string {
	parts := strings.Split(v, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// document is the product's price list entry, as AWS writes it.
func (p product) document() string {
	term := p.sku + "." + onDemandOfferTerm
	rate := term + "." + hourlyRateCode
	amount := strconv.FormatFloat(p.price, 'f', -1, 64)
	desc := "$" + amount
	if p.currency != "USD" {
		desc = amount + " " + p.currency
	}
	pub := p.published.UTC()
	doc := map[string]any{
		"product":         map[string]any{"productFamily": p.family, "attributes": p.attrs, "sku": p.sku},
		"serviceCode":     "AmazonEC2",
		"version":         pub.Format("20060102150405"),
		"publicationDate": pub.Format(time.RFC3339),
		"terms": map[string]any{"OnDemand": map[string]any{term: map[string]any{
			"offerTermCode": onDemandOfferTerm, "sku": p.sku, "effectiveDate": pub.Format(time.RFC3339), "termAttributes": map[string]string{},
			"priceDimensions": map[string]any{rate: map[string]any{
				"rateCode": rate, "unit": "Hrs", "beginRange": "0", "endRange": "Inf", "appliesTo": []string{},
				"description":  fmt.Sprintf("%s per On Demand Linux %s Instance Hour", desc, p.attrs["instanceType"]),
				"pricePerUnit": map[string]string{p.currency: strconv.FormatFloat(p.price, 'f', 10, 64)},
			}},
		}}},
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

// regionNames are the price list's location names of regions.
var regionNames = map[string]string{
	"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-1": "US West (N. California)",
	"us-west-2": "US West (Oregon)", "af-south-1": "Africa (Cape Town)", "ap-east-1": "Asia Pacific (Hong Kong)",
	"ap-south-1": "Asia Pacific (Mumbai)", "ap-south-2": "Asia Pacific (Hyderabad)", "ap-southeast-1": "Asia Pacific (Singapore)",
	"ap-southeast-2": "Asia Pacific (Sydney)", "ap-southeast-3": "Asia Pacific (Jakarta)", "ap-southeast-4": "Asia Pacific (Melbourne)",
	"ap-northeast-1": "Asia Pacific (Tokyo)", "ap-northeast-2": "Asia Pacific (Seoul)", "ap-northeast-3": "Asia Pacific (Osaka)",
	"ca-central-1": "Canada (Central)", "ca-west-1": "Canada West (Calgary)", "eu-central-1": "EU (Frankfurt)",
	"eu-central-2": "EU (Zurich)", "eu-west-1": "EU (Ireland)", "eu-west-2": "EU (London)", "eu-west-3": "EU (Paris)",
	"eu-south-1": "EU (Milan)", "eu-south-2": "EU (Spain)", "eu-north-1": "EU (Stockholm)", "il-central-1": "Israel (Tel Aviv)",
	"me-south-1": "Middle East (Bahrain)", "me-central-1": "Middle East (UAE)", "sa-east-1": "South America (Sao Paulo)",
	"us-gov-east-1": "AWS GovCloud (US-East)", "us-gov-west-1": "AWS GovCloud (US)", "cn-north-1": "China (Beijing)",
	"cn-northwest-1": "China (Ningxia)",
}

func locationName(region string) string {
	if n, ok := regionNames[region]; ok {
		return n
	}
	return region
}
