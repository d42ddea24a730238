package catalog

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"iter"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PriceRegion is the region whose on-demand prices every other region falls
// back to when none of its own are embedded (as Karpenter's static prices
// do), and the default region.
const PriceRegion = "us-east-1"

// The embedded on-demand prices: one file per region,
// data/prices-<region>.csv, opening with "# key: value" lines (region,
// currency, source, generated) and then the CSV name,on_demand_per_hour.
// data/README.md names the sources.
//
//go:embed data/prices-*.csv
var priceFiles embed.FS

var priceColumns = []string{"name", "on_demand_per_hour"}

// PriceTable is one region's Linux, shared-tenancy on-demand prices per
// instance-hour. It is immutable (NewPriceTable copies).
type PriceTable struct {
	// Region is the region the prices are for.
	Region string
	// Currency is "USD" (CNY in the China regions).
	Currency string
	// Source says where the figures come from (a snapshot named in
	// data/README.md, or the AWS Pricing API).
	Source string
	// Generated is when the figures were taken.
	Generated time.Time

	prices map[string]float64
	key    string // identity of the content, for the InstanceTypes cache
}

// NewPriceTable returns a table of prices (copied).
func NewPriceTable(region, currency, source string, generated time.Time, prices map[string]float64) *PriceTable {
	t := &PriceTable{Region: region, Currency: currency, Source: source, Generated: generated, prices: maps.Clone(prices)}
	if t.prices == nil {
		t.prices = map[string]float64{}
	}
	h := fnv.New64a()
	var b [8]byte
	for _, name := range slices.Sorted(maps.Keys(t.prices)) {
		h.Write([]byte(name))
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(t.prices[name]))
		h.Write(b[:])
	}
	t.key = fmt.Sprintf("%s/%s/%x", region, currency, h.Sum64())
	return t
}

// Price is the on-demand price of an instance type.
func (t *PriceTable) Price(instanceType string) (float64, bool) {
	p, ok := t.prices[instanceType]
	return p, ok
}

// Len is the number of priced instance types.
func (t *PriceTable) Len() int { return len(t.prices) }

// All yields every instance type and its price, by name.
func (t *PriceTable) All() iter.Seq2[string, float64] {
	return func(yield func(string, float64) bool) {
		for _, name := range slices.Sorted(maps.Keys(t.prices)) {
			if !yield(name, t.prices[name]) {
				return
			}
		}
	}
}

var (
	pricesOnce   sync.Once
	loadedPrices map[string]*PriceTable
	pricesErr    error
)

// embeddedPrices parses the embedded price files once.
func embeddedPrices() map[string]*PriceTable {
	pricesOnce.Do(func() {
		loadedPrices, pricesErr = parsePriceFiles(priceFiles)
	})
	if pricesErr != nil {
		// Embedded and covered by tests: a build defect.
		panic(fmt.Sprintf("catalog: embedded prices are corrupt: %v", pricesErr))
	}
	return loadedPrices
}

func parsePriceFiles(fsys embed.FS) (map[string]*PriceTable, error) {
	names, err := fsys.ReadDir("data")
	if err != nil {
		return nil, err
	}
	out := map[string]*PriceTable{}
	for _, de := range names {
		region, ok := strings.CutPrefix(strings.TrimSuffix(de.Name(), ".csv"), "prices-")
		if !ok {
			continue
		}
		data, err := fsys.ReadFile(path.Join("data", de.Name()))
		if err != nil {
			return nil, err
		}
		t, err := parsePriceFile(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", de.Name(), err)
		}
		if t.Region != region {
			return nil, fmt.Errorf("%s: region %q does not match the file name", de.Name(), t.Region)
		}
		out[region] = t
	}
	if out[PriceRegion] == nil {
		return nil, fmt.Errorf("no prices for %s", PriceRegion)
	}
	return out, nil
}

// EmbeddedPrices returns the embedded prices of a region.
func EmbeddedPrices(region string) (*PriceTable, bool) {
	t, ok := embeddedPrices()[region]
	return t, ok
}

// EmbeddedPriceRegions lists the regions with embedded prices, sorted.
func EmbeddedPriceRegions() []string {
	return slices.Sorted(maps.Keys(embeddedPrices()))
}

// PricesFor returns the embedded prices of region, else (exact false)
// PriceRegion's: a region without its own figures is priced like
// us-east-1, which keeps the relative order of instance types.
func PricesFor(region string) (t *PriceTable, exact bool) {
	if region == "" {
		region = PriceRegion
	}
	if t, ok := EmbeddedPrices(region); ok {
		return t, true
	}
	t, _ = EmbeddedPrices(PriceRegion)
	return t, false
}

// priceMetaKeys are the "# key: value" lines every price file opens with.
var priceMetaKeys = []string{"region", "currency", "source", "generated"}

// parsePriceFile reads one price file: its metadata lines, then the CSV.
func parsePriceFile(data []byte) (*PriceTable, error) {
	meta := map[string]string{}
	lines := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "#")
		if !ok {
			break
		}
		lines++
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not \"# key: value\"", lines, sc.Text())
		}
		meta[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	for _, k := range priceMetaKeys {
		if meta[k] == "" {
			return nil, fmt.Errorf("header: no %q line", "# "+k+": ...")
		}
	}
	if c := meta["currency"]; len(c) != 3 || strings.ToUpper(c) != c {
		return nil, fmt.Errorf("header: currency %q is not a 3-letter code", c)
	}
	generated, err := time.Parse(time.RFC3339, meta["generated"])
	if err != nil {
		return nil, fmt.Errorf("header: generated %q is not an RFC 3339 time", meta["generated"])
	}
	body := data
	for range lines {
		_, body, _ = bytes.Cut(body, []byte("\n"))
	}
	prices, err := parsePrices(body, lines)
	if err != nil {
		return nil, err
	}
	return NewPriceTable(meta["region"], meta["currency"], meta["source"], generated, prices), nil
}

// parsePrices reads the CSV part of a price file; skip is the number of
// lines before it (for line numbers in errors).
func parsePrices(data []byte, skip int) (map[string]float64, error) {
	rows, err := readTable(data, priceColumns)
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(rows))
	for i, rec := range rows {
		line := skip + i + 2
		p, err := strconv.ParseFloat(rec[1], 64)
		if err != nil || p < 0 || math.IsInf(p, 0) || math.IsNaN(p) {
			return nil, fmt.Errorf("line %d (%s): %s %q is not a non-negative number", line, rec[0], priceColumns[1], rec[1])
		}
		if _, dup := out[rec[0]]; dup {
			return nil, fmt.Errorf("line %d: duplicate name %q", line, rec[0])
		}
		out[rec[0]] = p
	}
	return out, nil
}
