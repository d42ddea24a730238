package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"go.uber.org/zap"

	"github.com/joiner-dev/joiner/cloud/catalog"
)

// PricingAPI is the part of the AWS Price List API the provider calls
// (*pricing.Client implements it).
type PricingAPI interface {
	GetProducts(context.Context, *pricing.GetProductsInput, ...func(*pricing.Options)) (*pricing.GetProductsOutput, error)
}

// PricingRegion is the region whose Price List API endpoint serves region:
// the API answers in a few regions only (as Karpenter picks them).
func PricingRegion(region string) string {
	switch {
	case strings.HasPrefix(region, "ap-"):
		return "ap-south-1"
	case strings.HasPrefix(region, "cn-"):
		return "cn-northwest-1"
	case strings.HasPrefix(region, "eu-"):
		return "eu-central-1"
	}
	return "us-east-1"
}

// Currency is the currency of a region's list prices.
func Currency(region string) string {
	if strings.HasPrefix(region, "cn-") {
		return "CNY"
	}
	return "USD"
}

// onDemandQueries are the GetProducts filters of a region's Linux
// on-demand prices, Karpenter's: shared-tenancy instances and bare-metal
// instances (listed with dedicated tenancy), no pre-installed software,
// used (not reserved) capacity.
func onDemandQueries(region string) [][]pricingtypes.Filter {
	term := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
	}
	common := []pricingtypes.Filter{
		term("regionCode", region), term("serviceCode", "AmazonEC2"), term("preInstalledSw", "NA"),
		term("operatingSystem", "Linux"), term("capacitystatus", "Used"), term("marketoption", "OnDemand"),
	}
	return [][]pricingtypes.Filter{
		append(slices.Clone(common), term("tenancy", "Shared"), term("productFamily", "Compute Instance")),
		append(slices.Clone(common), term("tenancy", "Dedicated"), term("productFamily", "Compute Instance (bare metal)")),
	}
}

// pricingPageSize is GetProducts' largest page.
const pricingPageSize = 100

// priceDocument is the part of a Price List product document read here.
type priceDocument struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// ParsePriceList reads the on-demand price of each instance type from
// GetProducts' PriceList documents (JSON strings): the first positive
// price in currency among the product's on-demand terms (in key order).
// Documents of other products (no instanceType) and without a price are
// skipped; malformed ones too, each with an error naming it.
func ParsePriceList(docs []string, currency string) (map[string]float64, []error) {
	out := map[string]float64{}
	var errs []error
	for i, doc := range docs {
		var d priceDocument
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			errs = append(errs, fmt.Errorf("price list document %d: %w", i, err))
			continue
		}
		it := d.Product.Attributes.InstanceType
		if it == "" {
			continue
		}
		price, err := onDemandPrice(d, currency)
		if err != nil {
			errs = append(errs, fmt.Errorf("price list document %d (%s): %w", i, it, err))
			continue
		}
		if _, seen := out[it]; !seen && price > 0 {
			out[it] = price
		}
	}
	return out, errs
}

// onDemandPrice is the first positive price of d in currency (0 when it
// lists none).
func onDemandPrice(d priceDocument, currency string) (float64, error) {
	for _, tk := range slices.Sorted(maps.Keys(d.Terms.OnDemand)) {
		dims := d.Terms.OnDemand[tk].PriceDimensions
		for _, dk := range slices.Sorted(maps.Keys(dims)) {
			v, ok := dims[dk].PricePerUnit[currency]
			if !ok {
				continue
			}
			p, err := strconv.ParseFloat(v, 64)
			if err != nil || p < 0 {
				return 0, fmt.Errorf("pricePerUnit %s %q in %s is not a price", currency, v, dk)
			}
			if p > 0 {
				return p, nil
			}
		}
	}
	return 0, nil
}

// pricingEnabled says whether on-demand prices come from the Pricing API,
// and if not, why.
func (p *Provider) pricingEnabled() (bool, string) {
	switch {
	case p.opts.Pricing == nil:
		return false, "no Pricing API client"
	case p.opts.IsolatedVPC:
		return false, "isolated VPC: the Pricing API is not reachable"
	case strings.HasPrefix(p.region, "us-gov-"):
		return false, "the Pricing API does not serve GovCloud regions"
	}
	return true, ""
}

// RefreshOnDemandPrices reads the region's Linux on-demand prices from the
// Pricing API (GetProducts, Karpenter's filters) and prices offerings with
// them; prices the answer leaves out keep their previous value. Without
// the API (IsolatedVPC, GovCloud, no client) it does nothing: the embedded
// prices stay. An answer missing shared-tenancy or bare-metal prices is an
// error and changes nothing.
func (p *Provider) RefreshOnDemandPrices(ctx context.Context) error {
	if ok, _ := p.pricingEnabled(); !ok {
		return nil
	}
	currency := Currency(p.region)
	var got [2]map[string]float64
	for i, filters := range onDemandQueries(p.region) {
		docs, err := p.getProducts(ctx, filters)
		if err != nil {
			return err
		}
		prices, errs := ParsePriceList(docs, currency)
		if len(errs) > 0 {
			p.log.Warn("skipping malformed price list documents", zap.Int("count", len(errs)), zap.Error(errors.Join(errs[:min(3, len(errs))]...)))
		}
		got[i] = prices
	}
	if len(got[0]) == 0 || len(got[1]) == 0 {
		return fmt.Errorf("pricing API: no on-demand prices for region %s (%d instance, %d bare-metal)", p.region, len(got[0]), len(got[1]))
	}
	merged := map[string]float64{}
	for name, price := range p.prices.onDemandTable().All() {
		merged[name] = price
	}
	maps.Copy(merged, got[0])
	maps.Copy(merged, got[1])
	t := catalog.NewPriceTable(p.region, currency, "AWS Pricing API", p.now(), merged)
	p.prices.setOnDemand(t, sourcePricingAPI, zap.Int("instance_types", len(got[0])+len(got[1])))
	return nil
}

// getProducts pages through GetProducts for AmazonEC2 products.
func (p *Provider) getProducts(ctx context.Context, filters []pricingtypes.Filter) ([]string, error) {
	var docs []string
	pages := pricing.NewGetProductsPaginator(p.opts.Pricing, &pricing.GetProductsInput{
		ServiceCode: aws.String("AmazonEC2"), Filters: filters, FormatVersion: aws.String("aws_v1"), MaxResults: aws.Int32(pricingPageSize),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("getting on-demand prices of region %s: %w", p.region, classify(err))
		}
		docs = append(docs, page.PriceList...)
	}
	return docs, nil
}
