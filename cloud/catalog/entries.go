package catalog

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
)

// The catalogue is copied from the project's shared data set and embedded:
// the binary never reads it from disk (nor the prices: prices.go).
//
//go:embed data/instance-types.csv
var instanceTypesCSV []byte

// Entry is one row of the embedded instance-type catalogue, joined with its
// us-east-1 on-demand price (InstanceTypes prices offerings with the
// region's: Options.Prices). Field meanings follow the data README: raw
// values as EC2 reports them, before any Kubernetes overhead.
type Entry struct {
	Name       string // e.g. "m5.large"
	Family     string // "m5"
	Category   string // "m"
	Generation int    // 5
	Size       string // "large"
	Arch       string // "amd64" or "arm64"
	VCPU       int
	MemoryMiB  int64 // raw instance memory
	GPUCount   int   // 0 for fractional-GPU types that still have a GPUName
	GPUName    string
	// GPUMemoryMiB is the memory of one GPU.
	GPUMemoryMiB int64
	ENIs         int // network interfaces on the default network card
	IPv4PerENI   int
	MaxPods      int // ENIs*(IPv4PerENI-1)+2
	// Hypervisor is "nitro" or "xen"; empty for bare metal.
	Hypervisor string
	// LocalNVMeGB is the total local NVMe instance store in GB; 0 if none.
	LocalNVMeGB int64
	// NetworkGbps is the baseline network bandwidth; 0 when EC2 gives no
	// number.
	NetworkGbps float64
	// OnDemandPrice is the us-east-1 Linux on-demand price in USD/hour,
	// valid when HasPrice.
	OnDemandPrice float64
	HasPrice      bool
}

var instanceTypeColumns = []string{
	"name", "family", "category", "generation", "size", "arch", "vcpu", "memory_mib",
	"gpu_count", "gpu_name", "gpu_memory_mib", "enis", "ipv4_per_eni", "max_pods",
	"hypervisor", "local_nvme_gb", "network_gbps",
}

type catalogue struct {
	entries []Entry        // sorted by name
	byName  map[string]int // index into entries
}

var (
	loadOnce sync.Once
	loaded   *catalogue
	loadErr  error
)

// load parses the embedded data once.
func load() *catalogue {
	loadOnce.Do(func() {
		loaded, loadErr = parseCatalogue(instanceTypesCSV, embeddedPrices()[PriceRegion])
	})
	if loadErr != nil {
		// The data is embedded and covered by tests: a failure here is a
		// build defect, not a runtime condition.
		panic(fmt.Sprintf("catalog: embedded data is corrupt: %v", loadErr))
	}
	return loaded
}

// Entries returns every catalogue row, sorted by name. The slice is shared:
// do not modify it.
func Entries() []Entry {
	return load().entries
}

// Lookup returns the catalogue row of an instance type.
func Lookup(name string) (Entry, bool) {
	c := load()
	i, ok := c.byName[name]
	if !ok {
		return Entry{}, false
	}
	return c.entries[i], true
}

// parseCatalogue parses the instance types and joins them with prices.
func parseCatalogue(typesData []byte, prices *PriceTable) (*catalogue, error) {
	entries, err := parseInstanceTypes(typesData)
	if err != nil {
		return nil, fmt.Errorf("parsing instance types: %w", err)
	}
	c := &catalogue{entries: entries, byName: make(map[string]int, len(entries))}
	sort.Slice(c.entries, func(i, j int) bool { return c.entries[i].Name < c.entries[j].Name })
	for i := range c.entries {
		e := &c.entries[i]
		if _, dup := c.byName[e.Name]; dup {
			return nil, fmt.Errorf("instance type %q: duplicate row", e.Name)
		}
		c.byName[e.Name] = i
		e.OnDemandPrice, e.HasPrice = prices.Price(e.Name)
	}
	return c, nil
}

// readTable reads a CSV with an exact header and returns its rows.
func readTable(data []byte, columns []string) ([][]string, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = len(columns)
	r.ReuseRecord = false
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("reading header: %w", err)
	}
	for i, c := range columns {
		if header[i] != c {
			return nil, fmt.Errorf("header column %d: want %q, got %q", i+1, c, header[i])
		}
	}
	var rows [][]string
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		rows = append(rows, rec)
	}
}

func parseInstanceTypes(data []byte) ([]Entry, error) {
	rows, err := readTable(data, instanceTypeColumns)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(rows))
	for i, rec := range rows {
		e, err := parseEntry(rec)
		if err != nil {
			return nil, fmt.Errorf("row %d (%s): %w", i+2, rec[0], err)
		}
		out = append(out, e)
	}
	return out, nil
}

// fieldParser collects the first error while converting one row.
type fieldParser struct {
	rec []string
	err error
}

func (p *fieldParser) str(col int) string { return p.rec[col] }

func (p *fieldParser) int64(col int, optional bool) int64 {
	v := p.rec[col]
	if v == "" && optional {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if (err != nil || n < 0) && p.err == nil {
		p.err = fmt.Errorf("%s %q is not a non-negative integer", instanceTypeColumns[col], v)
	}
	return n
}

func (p *fieldParser) float(col int, optional bool) float64 {
	v := p.rec[col]
	if v == "" && optional {
		return 0
	}
	f, err := strconv.ParseFloat(v, 64)
	if (err != nil || f < 0) && p.err == nil {
		p.err = fmt.Errorf("%s %q is not a non-negative number", instanceTypeColumns[col], v)
	}
	return f
}

func parseEntry(rec []string) (Entry, error) {
	p := &fieldParser{rec: rec}
	e := Entry{
		Name:         p.str(0),
		Family:       p.str(1),
		Category:     p.str(2),
		Generation:   int(p.int64(3, false)),
		Size:         p.str(4),
		Arch:         p.str(5),
		VCPU:         int(p.int64(6, false)),
		MemoryMiB:    p.int64(7, false),
		GPUCount:     int(p.int64(8, false)),
		GPUName:      p.str(9),
		GPUMemoryMiB: p.int64(10, true),
		ENIs:         int(p.int64(11, false)),
		IPv4PerENI:   int(p.int64(12, false)),
		MaxPods:      int(p.int64(13, false)),
		Hypervisor:   p.str(14),
		LocalNVMeGB:  p.int64(15, true),
		NetworkGbps:  p.float(16, true),
	}
	if p.err != nil {
		return Entry{}, p.err
	}
	switch {
	case e.Name == "" || e.Family == "" || e.Category == "" || e.Size == "":
		return Entry{}, fmt.Errorf("name, family, category and size must be set")
	case e.Arch != "amd64" && e.Arch != "arm64":
		return Entry{}, fmt.Errorf("arch %q is not amd64 or arm64", e.Arch)
	case e.VCPU <= 0 || e.MemoryMiB <= 0:
		return Entry{}, fmt.Errorf("vcpu %d and memory_mib %d must be positive", e.VCPU, e.MemoryMiB)
	case e.Hypervisor != "" && e.Hypervisor != "nitro" && e.Hypervisor != "xen":
		return Entry{}, fmt.Errorf("hypervisor %q is not nitro, xen or empty", e.Hypervisor)
	case e.GPUCount > 0 && e.GPUName == "":
		return Entry{}, fmt.Errorf("gpu_count %d without gpu_name", e.GPUCount)
	}
	return e, nil
}
