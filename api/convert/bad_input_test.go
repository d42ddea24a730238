package convert

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

const legacyItem = "{apiVersion: karpenter.sh/v1alpha5, kind: Provisioner, metadata: {name: x}, spec: {provider: {}}}"

// listOf is a v1 List holding a legacy Provisioner and item.
func listOf(item string) string {
	return "apiVersion: v1\nkind: List\nitems: [" + legacyItem + ", " + item + "]\n"
}

// nestedList wraps item in n v1 Lists.
func nestedList(n int, item string) string {
	for range n {
		item = "{apiVersion: v1, kind: List, items: [" + item + "]}"
	}
	return item
}

// TestBadInput: input that is not UTF-8 is refused whole, with an error
// naming the input, the byte, its offset, line, column and document; a
// document that could not be written back so that it reads the same is
// refused with an error naming the input, document and field (FuzzConvert
// findings).
func TestBadInput(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "not UTF-8 in a comment-only document",
			in:   "# \xff\n",
			want: "f.yaml: malformed manifest: byte 0xff at offset 2 (line 1, column 3, in document 1 (line 1)) is not UTF-8; nothing of this input is converted",
		},
		{
			name: "not UTF-8 in a separator's comment",
			in:   "a: 1\n--- # caf\xe9\nb: 2\n",
			want: "f.yaml: malformed manifest: byte 0xe9 at offset 14 (line 2, column 10, in a document separator) is not UTF-8",
		},
		{
			name: "not UTF-8 in a comment of a legacy document",
			in:   "a: 1\n---\n" + provisioner("p", "  providerRef: {name: default}\n") + "# \xc3\n---\nb: 2\n",
			want: "f.yaml: malformed manifest: byte 0xc3 at offset 120 (line 9, column 3, in document 2 (line 3)) is not UTF-8",
		},
		{
			name: "not UTF-8 in a value, last document without a line break",
			in:   "a: 1\n---\nb: x\xfey",
			want: "f.yaml: malformed manifest: byte 0xfe at offset 13 (line 3, column 5, in document 2 (line 3)) is not UTF-8",
		},
		{
			name: "UTF-16",
			in:   "\xff\xfea\x00:\x00 \x001\x00\n\x00",
			want: "f.yaml: malformed manifest: byte 0xff at offset 0 (line 1, column 1, in document 1 (line 1)) is not UTF-8",
		},
		{
			name: "merge key in a converted label",
			in:   "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: x, labels: {\"<<\": a}}\nspec: {provider: {}}\n",
			want: `f.yaml: document 1 (line 1): Provisioner x: encoding NodePool x: malformed manifest: metadata.labels.<<: a key "<<" cannot be written as YAML (it reads back as a merge)`,
		},
		{
			name: "merge key in converted tags",
			in:   "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: x}\nspec: {provider: {tags: {\"<<\": a}}}\n",
			want: `encoding EC2NodeClass x: malformed manifest: spec.tags.<<: a key "<<" cannot be written as YAML`,
		},
		{
			name: "merge key in a List item re-encoded",
			in:   listOf(`{"<<": ` + strings.Replace(legacyItem, "name: x", "name: z", 1) + "}"),
			want: `f.yaml: document 1 (line 1) items[1]: malformed manifest: <<: a key "<<" cannot be written as YAML`,
		},
		{
			name: "merge key deep in a List item",
			in:   listOf(`{a: [{b: {"<<": {c: 1}}}]}`),
			want: `items[1]: malformed manifest: a[0].b.<<: a key "<<"`,
		},
		{
			name: "List nested too deep in a List holding legacy items",
			in:   listOf(nestedList(maxListDepth, "{a: 1}")),
			want: "f.yaml: document 1 (line 1): List: malformed manifest: a List nested more than 8 Lists deep in a List holding legacy Karpenter objects; flatten it",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := ConvertInputs([]Input{{Name: "f.yaml", Data: []byte(tt.in)}}, nil)
			if err == nil {
				_, err = Encode(objs)
			}
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v\nwant ErrMalformed containing %q", err, tt.want)
			}
		})
	}
}

// TestOutputConvertsToItself: streams whose conversion once converted again
// (nested Lists) or was accepted only in part; each output converts to
// itself and holds the documents listed (FuzzConvert findings).
func TestOutputConvertsToItself(t *testing.T) {
	legacyZ := strings.Replace(legacyItem, "name: x", "name: z", 1)
	tests := []struct {
		name string
		in   string
		want []string // the output's documents, by kind and name
	}{
		{
			name: "List in a List holding a legacy item is split too",
			in:   listOf(nestedList(1, legacyZ)),
			want: []string{"NodePool x", "EC2NodeClass x", "NodePool z", "EC2NodeClass z"},
		},
		{
			name: "legacy item seven Lists deep",
			in:   listOf(nestedList(maxListDepth-1, legacyZ)),
			want: []string{"NodePool x", "EC2NodeClass x", "NodePool z", "EC2NodeClass z"},
		},
		{
			name: "List in a List without legacy items stays one document",
			in:   listOf(nestedList(1, "{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}")),
			want: []string{"NodePool x", "EC2NodeClass x", "List "},
		},
		{
			name: "legacy item only in a nested List",
			in:   "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}, " + nestedList(1, legacyZ) + "]\n",
			want: []string{"ConfigMap c", "NodePool z", "EC2NodeClass z"},
		},
		{
			name: "List nested too deep without legacy items passes through",
			in:   nestedList(maxListDepth+3, "{a: 1}"),
			want: []string{"List "},
		},
		{
			name: "UTF-8 comments and values",
			in:   "# café ☕\n---\nb: \"ÿ\" # ok\n",
			want: []string{"—", "—"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Convert([]byte(tt.in), nil)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Convert(out, nil)
			if err != nil {
				t.Fatalf("converting the output: %v\n%s", err, out)
			}
			if !bytes.Equal(out, again) {
				t.Fatalf("not idempotent:\n--- once\n%s\n--- twice\n%s", out, again)
			}
			var got []string
			for _, d := range splitDocuments(out) {
				tm, ok := rawTypeMeta(d.raw)
				switch {
				case !ok:
					got = append(got, "?")
				case tm.Kind == "" && tm.Metadata.Name == "":
					got = append(got, "—")
				default:
					got = append(got, tm.Kind+" "+tm.Metadata.Name)
				}
			}
			if strings.Join(got, ", ") != strings.Join(tt.want, ", ") {
				t.Errorf("documents %q, want %q\n%s", got, tt.want, out)
			}
		})
	}
}
