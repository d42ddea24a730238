package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/joiner-dev/joiner/api/convert"
)

func init() { addCommand(newConvertCmd) }

// newConvertCmd is `joiner convert`: legacy Karpenter manifests in, v1 out.
func newConvertCmd(*globals) *cobra.Command {
	var files []string
	var validate bool
	cmd := &cobra.Command{
		Use:   "convert -f FILE|DIR|- [-f ...]",
		Short: "Convert legacy Karpenter manifests (v1alpha5, v1alpha1, v1beta1) to v1",
		Long: `Convert reads multi-document YAML and writes it to stdout with every legacy Karpenter
object replaced by its v1 equivalent: karpenter.sh/v1alpha5 Provisioner -> NodePool (plus an
EC2NodeClass for an inline provider block), karpenter.k8s.aws/v1alpha1 AWSNodeTemplate ->
EC2NodeClass, karpenter.sh/v1beta1 NodePool and karpenter.k8s.aws/v1beta1 EC2NodeClass -> v1.
Other documents pass through unchanged. Fields with no v1 equivalent are dropped with a
warning on stderr. -f takes a file, a directory (its *.yaml and *.yml files in lexical
order) or - for stdin, and may be repeated; all inputs are converted together.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return errors.New("convert: -f FILE|DIR|- is required")
			}
			inputs, err := readInputs(files, cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("convert: %w", err)
			}
			stderr := cmd.ErrOrStderr()
			objs, err := convert.ConvertInputs(inputs, func(w string) { fmt.Fprintln(stderr, "warning:", w) })
			if err != nil {
				return fmt.Errorf("convert: %w", err)
			}
			if validate {
				if errs := convert.Validate(objs); len(errs) > 0 {
					for _, e := range errs {
						fmt.Fprintln(stderr, "error:", e)
					}
					return fmt.Errorf("convert: the converted v1 objects have %d validation error(s) (listed above; --validate=false writes them anyway)", len(errs))
				}
			}
			out, err := convert.Encode(objs)
			if err != nil {
				return fmt.Errorf("convert: %w", err)
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory (*.yaml, *.yml) or - for stdin; repeatable")
	cmd.Flags().BoolVar(&validate, "validate", true, "validate the produced v1 objects and fail on errors")
	return cmd
}

// readInputs reads each -f argument: a file, a directory's *.yaml/*.yml
// files in lexical order, or "-" for stdin (once).
func readInputs(args []string, stdin io.Reader) ([]convert.Input, error) {
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
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		paths := []string{a}
		if fi.IsDir() {
			entries, err := os.ReadDir(a)
			if err != nil {
				return nil, err
			}
			paths = nil
			for _, e := range entries {
				n := e.Name()
				if !e.IsDir() && (strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
					paths = append(paths, filepath.Join(a, n))
				}
			}
			sort.Strings(paths)
			if len(paths) == 0 {
				return nil, fmt.Errorf("%s: no *.yaml or *.yml files", a)
			}
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
