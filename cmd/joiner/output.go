package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// Output formats, by kubectl's names: "table" is the default human view
// (kubectl's unnamed default), "wide" adds columns, "name" prints
// kind.group/name per object.
const (
	outTable = "table"
	outWide  = "wide"
	outJSON  = "json"
	outYAML  = "yaml"
	outName  = "name"
)

// outputFlag is -o/--output with the formats one command prints.
type outputFlag struct {
	value   string
	allowed []string
}

// addOutputFlag registers -o on cmd: allowed[0] is the default; shell
// completion offers allowed.
func addOutputFlag(cmd *cobra.Command, allowed ...string) *outputFlag {
	o := &outputFlag{allowed: allowed}
	cmd.Flags().StringVarP(&o.value, "output", "o", allowed[0], "output format: "+strings.Join(allowed, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
	return o
}

// check rejects a format the command does not print.
func (o *outputFlag) check() error {
	if !slices.Contains(o.allowed, o.value) {
		return fmt.Errorf("-o %q: want one of %s", o.value, strings.Join(o.allowed, ", "))
	}
	return nil
}

// printTable prints t as kubectl prints tables (upper-case headers,
// aligned columns, nothing for no rows); wide also prints the columns
// of priority above 0.
func printTable(w io.Writer, t *metav1.Table, wide bool) error {
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide}).PrintObj(t, w)
}

// column is a table column; wide-only columns have priority 1.
func column(name string, wideOnly bool) metav1.TableColumnDefinition {
	c := metav1.TableColumnDefinition{Name: name, Type: "string"}
	if wideOnly {
		c.Priority = 1
	}
	return c
}

// row is a table row of cells.
func row(cells ...any) metav1.TableRow { return metav1.TableRow{Cells: cells} }

// printData writes v as indented JSON or YAML: the -o json and -o yaml
// of what is not a Kubernetes object.
func printData(w io.Writer, v any, format string) error {
	switch format {
	case outJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("-o %q: not a data format", format)
}

// printNames writes kind.group/name lines, as kubectl -o name does.
func printNames(w io.Writer, names []string) error {
	for _, n := range names {
		if _, err := fmt.Fprintln(w, n); err != nil {
			return err
		}
	}
	return nil
}
