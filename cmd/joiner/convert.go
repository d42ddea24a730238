package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/joiner-dev/joiner/api/convert"
)

func init() { addCommand(newConvertCmd) }

// convertFlags are the flags of `joiner convert`.
type convertFlags struct {
	files                  []string
	recursive              bool
	output                 string
	validate               bool
	defaultRole            string
	defaultInstanceProfile string
	ignoreDefaults         bool
}

// newConvertCmd is `joiner convert`: legacy Karpenter manifests in, v1 out.
func newConvertCmd(*globals) *cobra.Command {
	var f convertFlags
	cmd := &cobra.Command{
		Use:   "convert -f FILE|DIR|- [-f ...]",
		Short: "Convert legacy Karpenter manifests (v1alpha5, v1alpha1, v1beta1) to v1",
		Long: `Convert reads multi-document YAML and writes it to stdout with every legacy Karpenter
object replaced by its v1 equivalent, as Karpenter's own tools do (karpenter-convert, then
Karpenter v1.0's conversion webhooks): karpenter.sh/v1alpha5 Provisioner -> NodePool (plus an
EC2NodeClass for an inline provider block), karpenter.k8s.aws/v1alpha1 AWSNodeTemplate ->
EC2NodeClass, karpenter.sh/v1beta1 NodePool and NodeClaim and karpenter.k8s.aws/v1beta1
EC2NodeClass -> v1. Other documents pass through unchanged. Fields with no v1 equivalent are
dropped with a warning on stderr.

-f takes a file, a directory (its *.yaml, *.yml and *.json files in lexical order; with -R
its subdirectories too) or - for stdin, and may be repeated; all inputs are converted
together. A document that does not convert is reported on stderr with its position, kind,
name, field and value; every other document is still written, and the exit status is 1.

A legacy node class that relied on the aws.defaultInstanceProfile setting gets
role: $KARPENTER_NODE_ROLE, as karpenter-convert writes (substitute it with envsubst), unless
--default-role or --default-instance-profile gives one.

-o name prints kind.group/name of each object written, as kubectl -o name does.`,
		Example: `  joiner convert -f provisioner.yaml > nodepool.yaml
  # a GitOps tree, recursively, with the node role karpenter-convert would leave as a variable
  joiner convert -R -f manifests/ --default-role KarpenterNodeRole-my-cluster
  kubectl get provisioners,awsnodetemplates -o yaml | joiner convert -f - -o name`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return convertRun(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "file, directory (*.yaml, *.yml, *.json) or - for stdin; repeatable")
	fl.BoolVarP(&f.recursive, "recursive", "R", false, "read the directories given with -f recursively")
	fl.StringVarP(&f.output, "output", "o", "yaml", "output format: yaml (a multi-document stream), json (the object, or a v1 List of them) or name (kind.group/name per object)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml", "json", outName}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagFilename("filename", manifestFileExts...)
	fl.BoolVar(&f.validate, "validate", true, "validate the produced v1 objects; invalid ones are reported and not written")
	fl.StringVar(&f.defaultRole, "default-role", "", "spec.role for legacy node classes that name neither an instance profile nor a role (default: $KARPENTER_NODE_ROLE, as karpenter-convert writes)")
	fl.StringVar(&f.defaultInstanceProfile, "default-instance-profile", "", "spec.instanceProfile for legacy node classes that name neither an instance profile nor a role (instead of --default-role)")
	fl.BoolVar(&f.ignoreDefaults, "ignore-defaults", false, "leave out the requirements the v1alpha5 webhook defaulted (os, arch, capacity type, instance category and generation), like karpenter-convert --ignore-defaults")
	return cmd
}

// convertRun converts, writes what converted, and lists what did not.
func convertRun(cmd *cobra.Command, f convertFlags) error {
	if err := f.check(); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	inputs, err := readInputs(f.files, f.recursive, cmd.InOrStdin())
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	stderr := cmd.ErrOrStderr()
	r := convert.ConvertAll(inputs, convert.Options{
		Warn:                   func(w string) { fmt.Fprintln(stderr, "warning:", w) },
		DefaultRole:            f.defaultRole,
		DefaultInstanceProfile: f.defaultInstanceProfile,
		IgnoreDefaults:         f.ignoreDefaults,
	})
	objs, errs := r.Objects, r.Errors
	if f.validate {
		var invalid []error
		objs, invalid = convert.ValidateAll(objs)
		errs = append(errs, invalid...)
	}
	var out []byte
	var encErrs []error
	if f.output == outName {
		out, encErrs = objectNames(objs)
	} else {
		out, encErrs = convert.EncodeAs(objs, convert.Format(f.output))
	}
	errs = append(errs, encErrs...)
	if _, err := cmd.OutOrStdout().Write(out); err != nil {
		return fmt.Errorf("convert: writing output: %w", err)
	}
	for _, e := range errs {
		fmt.Fprintln(stderr, "error:", e)
	}
	if n := failedDocuments(errs); n > 0 {
		return fmt.Errorf("convert: %d document(s) not converted (errors above; the others were written)", n)
	}
	return nil
}

// check rejects flag combinations that cannot work.
func (f convertFlags) check() error {
	if len(f.files) == 0 {
		return errors.New("-f FILE|DIR|- is required")
	}
	if !slices.Contains(convert.Formats, convert.Format(f.output)) && f.output != outName {
		return fmt.Errorf("-o %q: want yaml, json or name", f.output)
	}
	if f.defaultRole != "" && f.defaultInstanceProfile != "" {
		return errors.New("--default-role and --default-instance-profile are mutually exclusive (v1 takes one of spec.role and spec.instanceProfile)")
	}
	return nil
}

// objectNames prints kind.group/name for each object (kubectl -o name).
func objectNames(objs []convert.Object) ([]byte, []error) {
	var b bytes.Buffer
	var errs []error
	p := &printers.NamePrinter{}
	for _, o := range objs {
		var data []byte
		var err error
		switch {
		case o.NodePool != nil:
			data, err = json.Marshal(o.NodePool)
		case o.EC2NodeClass != nil:
			data, err = json.Marshal(o.EC2NodeClass)
		case o.NodeClaim != nil:
			data, err = json.Marshal(o.NodeClaim)
		default:
			data, err = yaml.YAMLToJSON(o.Raw)
		}
		u := &unstructured.Unstructured{}
		if err == nil {
			err = u.UnmarshalJSON(data)
		}
		if err == nil {
			err = p.PrintObj(u, &b)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: printing its name: %w", o.Source, err))
		}
	}
	return b.Bytes(), errs
}

// failedDocuments counts the documents the errors are about (a document
// may have several invalid fields).
func failedDocuments(errs []error) int {
	docs := map[string]bool{}
	for _, e := range errs {
		var de *convert.DocumentError
		if errors.As(e, &de) {
			docs[de.Where+"\x00"+de.What] = true
		} else {
			docs[e.Error()] = true
		}
	}
	return len(docs)
}

// manifestExtensions are the files a directory given with -f contributes,
// as kubectl and karpenter-convert read them.
var manifestExtensions = []string{".yaml", ".yml", ".json"}

// readInputs reads each -f argument: a file, a directory's manifest files
// (recursively with recursive), or "-" for stdin (once).
func readInputs(args []string, recursive bool, stdin io.Reader) ([]convert.Input, error) {
	var inputs []convert.Input
	usedStdin := false
	for _, a := range args {
		if a == "-" {
			if usedStdin {
				return nil, errors.New("-f - given twice")
			}
			usedStdin = true
			b, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("reading stdin: %w", err)
			}
			inputs = append(inputs, convert.Input{Name: "<stdin>", Data: b})
			continue
		}
		paths, err := manifestPaths(a, recursive)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			inputs = append(inputs, convert.Input{Name: p, Data: b})
		}
	}
	return inputs, nil
}

// manifestPaths returns path itself for a file, or the manifest files of a
// directory in lexical order: its own, or with recursive those of its whole
// tree (each directory's entries in lexical order, subdirectories where they
// sort).
func manifestPaths(path string, recursive bool) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	var paths []string
	if recursive {
		err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && isManifest(d.Name()) {
				paths = append(paths, p)
			}
			return nil
		})
	} else {
		paths, err = topLevelManifests(path)
	}
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		hint := ""
		if !recursive {
			hint = " (-R reads subdirectories)"
		}
		return nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json files%s", path, hint)
	}
	return paths, nil
}

// topLevelManifests returns the manifest files directly in dir, sorted.
func topLevelManifests(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		if !e.IsDir() && isManifest(e.Name()) {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(paths)
	return paths, nil
}

func isManifest(name string) bool {
	return slices.ContainsFunc(manifestExtensions, func(ext string) bool { return strings.HasSuffix(name, ext) })
}
