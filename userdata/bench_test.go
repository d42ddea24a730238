package userdata

import "testing"

// BenchmarkRender renders each family with the full kubelet block and the
// family's own user data (the launcher renders once per instance-type group).
func BenchmarkRender(b *testing.B) {
	for _, c := range []struct{ family, file string }{
		{FamilyAL2, "mime.txt"}, {FamilyAL2023, "mime.txt"}, {FamilyBottlerocket, "settings.toml"}, {FamilyWindows2022, "windows.ps1"},
	} {
		b.Run(c.family, func(b *testing.B) {
			in := testInput(c.family, readInput(b, c.file), fullKubelet())
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Render(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
