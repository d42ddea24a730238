package bootstrap

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/agent/imds"
)

// MetadataGetter reads one instance-metadata path (imds.Client does).
type MetadataGetter interface {
	Get(ctx context.Context, path string) ([]byte, error)
}

// imdsMappingTimeout bounds reading the whole launch mapping. It is read
// once per instance, when the launch record is made.
const imdsMappingTimeout = 15 * time.Second

// LaunchMappingFromIMDS returns a volumes.Options.LaunchMapping that reads
// the block-device-mapping names of the EBS volumes the instance was
// launched with (meta-data/block-device-mapping/ebsN, in N order; ami, root,
// ephemeralN and swap are not EBS data volumes) and the instance ID. IMDS
// lists the volumes present at launch (or at the last start), never one
// attached later; it is asked only when the launch record is made.
func LaunchMappingFromIMDS(c MetadataGetter) func(context.Context) ([]string, string, error) {
	return func(ctx context.Context) ([]string, string, error) {
		ctx, cancel := context.WithTimeout(ctx, imdsMappingTimeout)
		defer cancel()
		list, err := c.Get(ctx, "block-device-mapping/")
		if err != nil {
			return nil, "", fmt.Errorf("listing the launch block-device mapping: %w", err)
		}
		mappings := []string{}
		for _, name := range ebsEntries(string(list)) {
			b, err := c.Get(ctx, "block-device-mapping/"+name)
			if err != nil {
				return nil, "", fmt.Errorf("reading the launch block-device mapping %s: %w", name, err)
			}
			if v := strings.TrimSpace(string(b)); v != "" {
				mappings = append(mappings, v)
			}
		}
		id := ""
		if b, err := c.Get(ctx, imds.PathInstanceID); err == nil {
			id = strings.TrimSpace(string(b))
		}
		return mappings, id, nil
	}
}

var ebsEntry = regexp.MustCompile(`^ebs([0-9]+)$`)

// ebsEntries picks the ebsN names out of a block-device-mapping/ listing,
// in N order.
func ebsEntries(listing string) []string {
	var names []string
	for _, f := range strings.Fields(listing) {
		if ebsEntry.MatchString(strings.TrimSuffix(f, "/")) {
			names = append(names, strings.TrimSuffix(f, "/"))
		}
	}
	n := func(s string) int { v, _ := strconv.Atoi(ebsEntry.FindStringSubmatch(s)[1]); return v }
	sort.SliceStable(names, func(i, j int) bool { return n(names[i]) < n(names[j]) })
	return names
}

// defaultLaunchMapping is IMDS (IMDSv2) at its link-local address. In the
// shipped joiner-bootstrap.service IP is denied, so it fails fast and the
// first boot records the volumes present (before the kubelet, no CSI volume
// can be).
func defaultLaunchMapping(ctx context.Context) ([]string, string, error) {
	c, err := imds.NewClient(imds.ClientOptions{Timeout: 3 * time.Second})
	if err != nil {
		return nil, "", err
	}
	return LaunchMappingFromIMDS(c)(ctx)
}
