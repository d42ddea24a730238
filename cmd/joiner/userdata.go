package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	yaml "go.yaml.in/yaml/v2"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/userdata"
)

func init() { addCommand(newUserdataCmd) }

// newUserdataCmd is `joiner userdata`, with one subcommand: render.
func newUserdataCmd(*globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "userdata",
		Short: "Render the user data an EC2NodeClass and NodePool produce",
		Example: `  joiner userdata render --nodeclass nodeclass.yaml --nodepool nodepool.yaml --cluster-name demo \
    --endpoint https://ABC.gr7.us-west-2.eks.amazonaws.com --service-cidr 10.100.0.0/16`,
	}
	cmd.AddCommand(newUserdataRenderCmd())
	return cmd
}

type renderFlags struct {
	nodeClass, nodePool         string
	nodeClassName, nodePoolName string
	instanceType, capacityType  string
	cluster                     userdata.Cluster
	caFile                      string
	joinerImage                 bool
	b64                         bool
}

func newUserdataRenderCmd() *cobra.Command {
	var f renderFlags
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the user data an instance launched from an EC2NodeClass and NodePool runs",
		Long: `render prints the EC2 user data Joiner would give an instance of the NodePool
(its template labels, single-valued requirements, taints and startup taints) with
the EC2NodeClass (amiFamily or alias, userData, kubelet, instanceStorePolicy, the
joiner.io/agent annotation). With --instance-type, max pods come from the
embedded instance catalogue. Files may hold several YAML documents; the
EC2NodeClass and NodePool are picked by kind (and by name when given).`,
		Example: `  joiner userdata render --nodeclass nodeclass.yaml --nodepool nodepool.yaml \
    --instance-type m5.large --cluster-name demo --endpoint https://ABC.gr7.us-west-2.eks.amazonaws.com \
    --ca-file ca.crt --service-cidr 10.100.0.0/16`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := renderUserData(f)
			if err != nil {
				return &errExitCode{code: 2, err: err}
			}
			if f.b64 {
				out = []byte(base64.StdEncoding.EncodeToString(out) + "\n")
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.nodeClass, "nodeclass", "", "file holding the EC2NodeClass (YAML or JSON)")
	fl.StringVar(&f.nodePool, "nodepool", "", "file holding the NodePool (YAML or JSON)")
	fl.StringVar(&f.nodeClassName, "nodeclass-name", "", "EC2NodeClass to pick when the file holds several")
	fl.StringVar(&f.nodePoolName, "nodepool-name", "", "NodePool to pick when the file holds several")
	fl.StringVar(&f.instanceType, "instance-type", "", "instance type whose max pods and vCPUs apply (embedded catalogue)")
	fl.StringVar(&f.capacityType, "capacity-type", "", "capacity type label (default: the NodePool's single-valued requirement, else on-demand)")
	fl.StringVar(&f.cluster.Name, "cluster-name", "", "cluster name")
	fl.StringVar(&f.cluster.Endpoint, "endpoint", "", "cluster API server endpoint")
	fl.StringVar(&f.caFile, "ca-file", "", "cluster CA bundle file (PEM, or already base64)")
	fl.StringVar(&f.cluster.ServiceCIDR, "service-cidr", "", "cluster service CIDR (required for AL2023); cluster DNS is its 10th address")
	fl.StringVar(&f.cluster.DNSIP, "dns-ip", "", "cluster DNS IP (default: 10th address of --service-cidr)")
	fl.BoolVar(&f.b64, "base64", false, "print the user data base64 encoded, as EC2 receives it")
	fl.BoolVar(&f.joinerImage, "joiner-image", false, "render for a Joiner-built image (tagged joiner.io/ami=true): call joiner bootstrap before the kubelet (default: a stock EKS image)")
	_ = cmd.MarkFlagRequired("nodeclass")
	_ = cmd.MarkFlagRequired("nodepool")
	for _, name := range []string{"nodeclass", "nodepool"} {
		_ = cmd.MarkFlagFilename(name, manifestFileExts...)
	}
	_ = cmd.MarkFlagFilename("ca-file")
	_ = cmd.RegisterFlagCompletionFunc("instance-type", completeInstanceTypes)
	_ = cmd.RegisterFlagCompletionFunc("capacity-type", cobra.FixedCompletions([]string{"on-demand", "spot", "reserved"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func renderUserData(f renderFlags) ([]byte, error) {
	var nc awsv1.EC2NodeClass
	if err := loadObject(f.nodeClass, "EC2NodeClass", f.nodeClassName, &nc); err != nil {
		return nil, err
	}
	var np karpv1.NodePool
	if err := loadObject(f.nodePool, "NodePool", f.nodePoolName, &np); err != nil {
		return nil, err
	}
	opts := userdata.BuildOptions{Cluster: f.cluster, CapacityType: f.capacityType, JoinerImage: f.joinerImage}
	if f.caFile != "" {
		b, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		opts.Cluster.CABundle = caBundle(b)
	}
	if f.instanceType != "" {
		e, ok := catalog.Lookup(f.instanceType)
		if !ok {
			return nil, fmt.Errorf("--instance-type %q: not in the embedded catalogue", f.instanceType)
		}
		opts.InstanceMaxPods, opts.VCPU = int32(e.MaxPods), int32(e.VCPU)
	}
	in := userdata.FromNodePool(&nc, &np, opts)
	if in.Family != userdata.FamilyCustom {
		var missing []string
		if in.Cluster.Name == "" {
			missing = append(missing, "--cluster-name")
		}
		if in.Cluster.Endpoint == "" {
			missing = append(missing, "--endpoint")
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("amiFamily %s needs %s", in.Family, strings.Join(missing, " and "))
		}
	}
	out, err := userdata.Render(in)
	if err != nil {
		if errors.Is(err, userdata.ErrServiceCIDRUnknown) {
			return nil, fmt.Errorf("%w (pass --service-cidr)", err)
		}
		return nil, fmt.Errorf("rendering user data for EC2NodeClass %s: %w", nc.Name, err)
	}
	return out, nil
}

// caBundle base64-encodes a PEM CA file; text that is not PEM is taken as
// already base64 encoded.
func caBundle(b []byte) string {
	if bytes.Contains(b, []byte("-----BEGIN")) {
		return base64.StdEncoding.EncodeToString(b)
	}
	return strings.TrimSpace(string(b))
}

// loadObject reads the document of the given kind (and name, if not empty)
// from a YAML or JSON file into out, rejecting unknown fields.
func loadObject(path, kind, name string, out any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kind, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var found [][]byte
	var names []string
	for i := 1; ; i++ {
		var doc any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if doc == nil {
			continue
		}
		js, err := json.Marshal(jsonable(doc))
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(js, &meta); err != nil || meta.Kind != kind {
			continue
		}
		names = append(names, meta.Metadata.Name)
		if name == "" || meta.Metadata.Name == name {
			found = append(found, js)
		}
	}
	switch {
	case len(found) == 0 && name != "":
		return fmt.Errorf("%s: no %s named %q (found %v)", path, kind, name, names)
	case len(found) == 0:
		return fmt.Errorf("%s: no document of kind %s", path, kind)
	case len(found) > 1:
		return fmt.Errorf("%s: %d documents of kind %s (%s); pick one with --%s-name", path, len(found), kind,
			strings.Join(names, ", "), strings.ToLower(strings.TrimPrefix(kind, "EC2")))
	}
	d := json.NewDecoder(bytes.NewReader(found[0]))
	d.DisallowUnknownFields()
	if err := d.Decode(out); err != nil {
		return fmt.Errorf("%s: %s: %w", path, kind, err)
	}
	return nil
}

// jsonable turns YAML v2's map[interface{}]interface{} into JSON-encodable maps.
func jsonable(v any) any {
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, val := range t {
			m[fmt.Sprint(k)] = jsonable(val)
		}
		return m
	case []any:
		for i := range t {
			t[i] = jsonable(t[i])
		}
		return t
	}
	return v
}
